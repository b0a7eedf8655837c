"""Cell parsers shared by the trace loaders: each failure names the file, line and column.

Loaders read untrusted files; a user fixing a 15,000-line trace needs ``file:line: column: what is
wrong``, not a traceback. Every parser here raises ``InputError`` in that one-line form.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...model import InputError

_TRUE = frozenset({"1", "true", "yes", "y", "t"})
_FALSE = frozenset({"", "0", "false", "no", "n", "f"})


class Where:
    """A (file, line) position that turns problems into InputErrors."""

    def __init__(self, path: str | Path, line: int) -> None:
        self.path = str(path)
        self.line = line

    def error(self, message: str) -> InputError:
        return InputError(f"{self.path}:{self.line}: {message}")

    def number(self, column: str, cell: str) -> float:
        try:
            value = float(cell)
        except ValueError:
            raise self.error(f"{column}: expected a number, got {cell!r}") from None
        if not math.isfinite(value):
            raise self.error(f"{column}: expected a finite number, got {cell!r}")
        return value

    def time(self, column: str, cell: str) -> float:
        value = self.number(column, cell)
        if value < 0:
            raise self.error(f"{column}: negative time {cell!r}")
        return value

    def positive(self, column: str, cell: str) -> float:
        value = self.number(column, cell)
        if value <= 0:
            raise self.error(f"{column}: must be > 0, got {cell!r}")
        return value

    def count(self, column: str, cell: str) -> int:
        """A positive integer; "4.0" is accepted as 4 (spreadsheets write integers that way)."""
        value = self.number(column, cell)
        if value <= 0 or not value.is_integer():
            raise self.error(f"{column}: expected a positive integer, got {cell!r}")
        return int(value)

    def flag(self, column: str, cell: str) -> bool:
        low = cell.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise self.error(f"{column}: expected true/false (or 1/0), got {cell!r}")


def format_number(x: float) -> str:
    """Shortest text that reads back to exactly ``x``; integral values without a trailing ".0"."""
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return repr(x)
