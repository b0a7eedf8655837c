"""`tesserae daemon --log-format json`: one JSON object a line, for log shippers.

Keys: time (UTC, ISO 8601), level, logger, message, and round / job / action / outcome when the line is
about one: taken from the record's ``extra`` when the code gave them (the journal's action outcomes do),
else read off the message's "round N" / "job ID" wording, so every existing line carries what it names.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

FIELDS = ("round", "job", "action", "outcome")
_ROUND = re.compile(r"\bround (\d+)\b")
_JOB = re.compile(r"\bjob (\d+(?:_\d+)?)\b")
_ROUND_OUTCOME = re.compile(r"\bround \d+ (applied|partial|skipped|failed|dry-run|planned)\b")
HUMAN = "%(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name,
        }
        guesses = {"round": _ROUND.search(msg), "job": _JOB.search(msg), "outcome": _ROUND_OUTCOME.search(msg)}
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is None and (m := guesses.get(key)) is not None:
                value = int(m.group(1)) if key == "round" else m.group(1)
            if value is not None:
                out[key] = value
        out["message"] = msg
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def formatter(kind: str) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(HUMAN)
