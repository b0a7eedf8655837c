"""The only place the Slurm layer starts a process: argv in, stdout out, one clear error line.

Every call has a timeout. Transient failures (controller unreachable, socket timed out, our own
timeout) are retried a bounded number of times with exponential backoff; anything else (an
invalid job id, a bad option) fails at once. Exceptions carry a single line naming the command
and Slurm's own message, so the CLI and the daemon's log can show them as they are.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0

# Substrings of Slurm client stderr that mean "the controller (or munge) is not answering right
# now"; retrying may help. Matched case-insensitively.
TRANSIENT_MARKERS: tuple[str, ...] = (
    "connection refused",
    "socket timed out",
    "unable to contact slurm controller",
    "unable to establish controller",
    "communication connection failure",
    "zero bytes were transmitted",
    "resource temporarily unavailable",
    "slurm_receive_msg",
    "slurmctld is not responding",
    "munge",
    "unexpected message received",  # scontrol update/release while slurmctld is down (22.05)
)


class SlurmError(RuntimeError):
    """Base class; str(exc) is one line for the user."""


class SlurmUnavailable(SlurmError):
    """Slurm could not be reached: binary missing, controller down, or calls kept timing out."""


class SlurmCommandError(SlurmError):
    """Slurm answered and refused: non-zero exit with a non-transient message (e.g. invalid job id)."""

    def __init__(self, message: str, *, returncode: int, stderr: str, stdout: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.stdout = stdout


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: attempts = 1 + retries, sleeping backoff_s * 2**k between them."""

    retries: int = 1
    backoff_s: float = 0.5
    max_backoff_s: float = 4.0

    def delay(self, attempt: int) -> float:
        return min(self.backoff_s * 2.0**attempt, self.max_backoff_s)


def one_line(text: str, limit: int = 300) -> str:
    """Collapse Slurm's multi-line stderr into one line, keeping it short."""
    parts = [p.strip() for p in text.strip().splitlines() if p.strip()]
    line = " | ".join(parts)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def is_transient(stderr: str) -> bool:
    low = stderr.lower()
    if "invalid job id" in low:
        return False
    return any(marker in low for marker in TRANSIENT_MARKERS)


class SlurmRunner:
    """Runs Slurm client commands with `env` laid over the current environment.

    `sleep` is injectable so tests of the retry logic need no real waiting.
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.retry = retry
        self._sleep = sleep

    def full_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update(self.env)
        if extra:
            merged.update(extra)
        return merged

    def run(
        self,
        argv: Sequence[str],
        *,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        retries: int | None = None,
    ) -> str:
        """Run `argv` (no shell) and return its stdout; raise SlurmUnavailable/SlurmCommandError."""
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        limit = self.timeout_s if timeout_s is None else timeout_s
        max_retries = self.retry.retries if retries is None else retries
        full_env = self.full_env(env)
        last_error: SlurmError | None = None
        for attempt in range(max_retries + 1):
            if attempt:
                delay = self.retry.delay(attempt - 1)
                log.info("retrying %s in %.2fs after: %s", argv[0], delay, last_error)
                self._sleep(delay)
            try:
                proc = subprocess.run(
                    argv,
                    input=input_text,
                    capture_output=True,
                    text=True,
                    env=full_env,
                    timeout=limit,
                    check=False,
                )
            except FileNotFoundError as exc:
                raise SlurmUnavailable(f"{argv[0]}: command not found (is Slurm installed?)") from exc
            except subprocess.TimeoutExpired:
                last_error = SlurmUnavailable(f"{_describe(argv)}: timed out after {limit:g}s")
                continue
            if proc.returncode == 0:
                return proc.stdout
            message = f"{_describe(argv)}: {one_line(proc.stderr) or f'exit status {proc.returncode}'}"
            if is_transient(proc.stderr):
                last_error = SlurmUnavailable(message)
                continue
            raise SlurmCommandError(message, returncode=proc.returncode, stderr=proc.stderr, stdout=proc.stdout)
        assert last_error is not None
        raise last_error


def _describe(argv: Sequence[str]) -> str:
    """`scontrol update` / `sbatch` — the command and its verb, not every argument."""
    head = os.path.basename(argv[0])
    if len(argv) > 1 and not argv[1].startswith("-") and head in ("scontrol", "sacctmgr"):
        return f"{head} {argv[1]}"
    return head
