"""The Slurm seam: argv builders, one subprocess runner, pure parsers, and the backend the daemon uses."""

from .backend import SlurmBackend, SlurmBackendError, SlurmCliBackend
from .choose import make_backend
from .parse import SlurmParseError, SlurmReportedError
from .runner import (
    RetryPolicy,
    SlurmCommandError,
    SlurmError,
    SlurmRunner,
    SlurmUnavailable,
)
from .types import NodeGpus, SlurmJob, SlurmJobState, SlurmNode

__all__ = [
    "NodeGpus",
    "RetryPolicy",
    "SlurmBackend",
    "SlurmBackendError",
    "SlurmCliBackend",
    "SlurmCommandError",
    "SlurmError",
    "SlurmJob",
    "SlurmJobState",
    "SlurmNode",
    "SlurmParseError",
    "SlurmReportedError",
    "SlurmRunner",
    "SlurmUnavailable",
    "make_backend",
]
