"""A batch script's `#SBATCH` header, read the way sbatch reads it, and rewritten without some options.

tsbatch translates GPU and node options into the daemon's GPU count; those must then not reach Slurm
(the managed partition admits no GPU request), also when they sit in the script's header. sbatch has no
switch to ignore a directive, so tsbatch submits a copy of the script with those tokens cut out of
their lines, every other byte kept. Tokens follow sbatch's own rules (src/sbatch/opt.c
``_get_argument``): whitespace separates, ``"`` and ``'`` quote, ``\\`` escapes, an unquoted ``#``
starts a comment; the header ends at the first line that is neither blank nor a comment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model import InputError

_MAGIC = ("#SBATCH", "#SLURM")


@dataclass(frozen=True)
class HeaderToken:
    text: str  # the argument as sbatch sees it (quotes and escapes removed)
    line: int  # 0-based line of the script
    start: int  # span of the raw characters in that line
    end: int


def header_tokens(script: str) -> list[HeaderToken]:
    """The arguments of the directives sbatch reads, in order, with where each one is written."""
    out: list[HeaderToken] = []
    lines = script.split("\n")
    for no, line in enumerate(lines):
        if no == 0 and line.startswith("#!"):
            continue
        stripped = line.strip()
        magic = next((m for m in _MAGIC if line.startswith(m)), None)
        if magic is None:
            if not stripped or stripped.startswith("#"):
                continue
            break
        out.extend(_split(line, no, len(magic)))
    return out


def _split(line: str, no: int, pos: int) -> list[HeaderToken]:
    tokens: list[HeaderToken] = []
    n = len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        if pos >= n or line[pos] == "#":
            return tokens
        start, chars, quote = pos, [], ""
        while pos < n and (quote or not line[pos].isspace()):
            c = line[pos]
            if c == "\\" and pos + 1 < n:
                chars.append(line[pos + 1])
                pos += 2
                continue
            if quote:
                if c == quote:
                    quote = ""
                else:
                    chars.append(c)
            elif c in "\"'":
                quote = c
            elif c == "#":
                break
            else:
                chars.append(c)
            pos += 1
        if quote:
            raise InputError(f"#SBATCH line {no + 1}: unmatched {quote} (sbatch refuses it too)")
        if chars:
            tokens.append(HeaderToken("".join(chars), no, start, pos))


def without(script: str, drop: Iterable[HeaderToken]) -> str:
    """The script with the given header tokens cut out; each changed line says what tsbatch took."""
    by_line: dict[int, list[HeaderToken]] = {}
    for t in drop:
        by_line.setdefault(t.line, []).append(t)
    lines = script.split("\n")
    for no, tokens in by_line.items():
        line = lines[no]
        for t in sorted(tokens, key=lambda t: t.start, reverse=True):
            line = line[:t.start] + line[t.end:]
        taken = " ".join(line_text(lines[no], t) for t in sorted(tokens, key=lambda t: t.start))
        lines[no] = f"{line.rstrip()}  # tsbatch translated: {taken}"
    return "\n".join(lines)


def line_text(line: str, token: HeaderToken) -> str:
    return line[token.start:token.end].replace("#", "")
