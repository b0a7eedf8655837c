"""A fingerprint of the code and shipped data that simulation results depend on.

Result caches (``results/runner.py``) key their entries by it, so a summary simulated by other
code is never shown as this code's result; a docstring edit re-simulates too, which is the price of
never being wrong. The reproduction's own package (``results/``: what to run, how to render it) is
left out: a reworded sentence of docs/results.md must not re-simulate every study.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
_SUFFIXES = (".py", ".csv", ".json", ".trace", ".yaml", ".txt")
_LEFT_OUT = "results"  # the reproduction's planning and rendering (see above)


@functools.cache
def code_fingerprint(root: Path = _PACKAGE) -> str:
    """12 hex digits over every source and data file of the package (paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _SUFFIXES and "__pycache__" not in p.parts
                       and p.relative_to(root).parts[0] != _LEFT_OUT):
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:12]
