"""The one way the package compiles its cores (numba, a required dependency)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

F = TypeVar("F", bound=Callable[..., Any])


def jit(fn: F) -> F:
    """Compiled, with numba's on-disk cache where it can write one (next to the module, the user's
    cache directory, or ``NUMBA_CACHE_DIR``). Without any (a read-only install under systemd's
    ProtectSystem/ProtectHome), numba refuses ``cache=True`` at import: compile once per process."""
    try:
        return cast(F, njit(cache=True, nogil=True)(fn))
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return cast(F, njit(nogil=True)(fn))
