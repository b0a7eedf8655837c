"""`tesserae jobs | rounds | round show N | explain JOB`: read-only views of the daemon's state database."""

from __future__ import annotations

import argparse

from .admin import explain, jobs, rounds


def add_parser(sub: argparse._SubParsersAction) -> None:
    jobs.add_parser(sub)
    rounds.add_parser(sub)
    explain.add_parser(sub)
