"""The daemon's read-only web page and JSON API (``http.listen``), stdlib only.

The page (daemon/operators/webui/: plain HTML, CSS and JS shipped in the package, no CDN) comes with the
API's answers embedded (a JSON block the script draws from before the page's load event, so a screenshot
or a slow API never catches it empty), then polls the API. The API answers from the state database
through daemon/operators/api.py, the same readers as the admin commands. GET and HEAD only (anything
else: 405); answers are bounded (MAX_BODY) and never carry a job's command line or environment. It runs
in its own threads on its own read-only connection, so a slow reader never holds up a round.

    GET /                       the page
    GET /api/cluster            nodes x GPUs as the jobs hold them now, planned starts/moves/stops, holds,
                                the newest finished round's figures
    GET /api/jobs               jobs (?states=PD,R  ?all=1  ?user=U  ?jobs=1,2) with reason and rank
    GET /api/jobs/ID            one job: `tesserae explain` (reasons, rank, history of actions)
    GET /api/rounds             recent rounds (?n=50, at most 500) with utilization
    GET /api/rounds/N|last      one round's decision: `tesserae round show --json`
    GET /api/actions            operators' holds, pins and drains in force (?all=1: every request)
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...model import InputError
from ..service.metrics import start_http
from ..state.store import Store
from . import api
from .readers import FirstLook

log = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024  # bytes in one answer; a bigger one is refused (narrow the query)
MAX_TARGET = 2048  # characters in a request target
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/static/style.css": ("style.css", "text/css; charset=utf-8")}
PAGE_ROUNDS = 40  # rounds the page's timeline shows (app.js asks for as many)
INITIAL = b'<script type="application/json" id="initial"></script>'  # in index.html: the embedded answers
ENDPOINTS = ["/api/cluster", "/api/jobs", "/api/jobs/ID", "/api/rounds", "/api/rounds/N|last", "/api/actions"]


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _one(q: dict[str, list[str]], key: str) -> str | None:
    v = q.get(key)
    return v[-1] if v else None


def answer(store: Store, path: str, query: str, look: FirstLook | None = None,
           reads: api.Reads | None = None) -> dict[str, Any]:
    """The JSON body for an API path (raises ApiError with the status to send); ``look``: Slurm's listing
    of the partition, for the jobs the daemon has not looked at yet; ``reads``: what this request read
    already (the page's answers share it)."""
    from .readers import json_meta

    q = parse_qs(query, keep_blank_values=True)
    parts = [p for p in path.split("/") if p][1:]  # after "api"
    try:
        if parts == ["cluster"]:
            body = api.cluster(store, reads)
        elif parts == ["jobs"]:
            body = api.jobs(store, states=_one(q, "states"), all_jobs=_one(q, "all") in ("1", "true", "yes"),
                            ids=_one(q, "jobs"), user=_one(q, "user"), look=look,
                            limit=api.MAX_JOBS, reads=reads)
        elif len(parts) == 2 and parts[0] == "jobs":
            body = api.job(store, parts[1], look)
        elif parts == ["actions"]:
            body = api.actions(store, every=_one(q, "all") in ("1", "true", "yes"))
        elif parts == ["rounds"]:
            n = _one(q, "n") or "50"
            if not n.isdigit():
                raise InputError(f"n must be a number, got {n!r}")
            body = api.rounds(store, int(n))
        elif len(parts) == 2 and parts[0] == "rounds":
            body = api.round_(store, parts[1])
        elif not parts:
            body = {"endpoints": ENDPOINTS}
        else:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no such endpoint {path}; known: {', '.join(ENDPOINTS)}")
    except InputError as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, str(exc)) from None
    except LookupError as exc:
        raise ApiError(HTTPStatus.NOT_FOUND, str(exc.args[0] if exc.args else exc)) from None
    return {"meta": json_meta(), **body}


def page(store: Store, look: FirstLook | None = None) -> bytes:
    """index.html with the answers the page draws first: /api/cluster, /api/jobs and /api/rounds, the
    first two from one read of the job rows and the newest decision. If the database cannot be read now,
    the page goes out without them and its script asks the API."""
    html = files("tesserae_slurm.daemon.operators.webui").joinpath("index.html").read_bytes()
    try:
        reads = api.Reads(store)
        data = {"cluster": answer(store, "/api/cluster", "", reads=reads),
                "jobs": answer(store, "/api/jobs", "", look, reads),
                "rounds": answer(store, "/api/rounds", f"n={PAGE_ROUNDS}")}
    except Exception as exc:  # noqa: BLE001 - the page still loads; its script retries the API
        log.warning("web: the page's embedded data failed: %r", exc)
        return html
    text = json.dumps(data, default=str).replace("<", "\\u003c")  # no "</script>" inside the block
    return html.replace(INITIAL, INITIAL[:-9] + text.encode() + b"</script>")


def _handler(store: Store, look: FirstLook | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tesserae-web"
        timeout = 10  # seconds a client may take to send its request

        def _send(self, status: int, body: bytes, ctype: str, head: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
            if status == HTTPStatus.METHOD_NOT_ALLOWED:
                self.send_header("Allow", "GET, HEAD")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _error(self, status: int, message: str, head: bool = False) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(status, body, "application/json", head)

        def _get(self, head: bool) -> None:
            if len(self.path) > MAX_TARGET:
                self._error(HTTPStatus.REQUEST_URI_TOO_LONG, f"request target longer than {MAX_TARGET}", head)
                return
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            if path in ASSETS:
                name, ctype = ASSETS[path]
                body = page(store, look) if name == "index.html" else \
                    files("tesserae_slurm.daemon.operators.webui").joinpath(name).read_bytes()
                self._send(HTTPStatus.OK, body, ctype, head)
                return
            if path != "/api" and not path.startswith("/api/"):
                self._error(HTTPStatus.NOT_FOUND, f"no such page {path}; the page is /, the API /api", head)
                return
            try:
                body = json.dumps(answer(store, path, url.query, look), default=str).encode()
            except ApiError as exc:
                self._error(exc.status, str(exc), head)
                return
            except Exception as exc:  # noqa: BLE001 - the database busy or moved: say so, keep serving
                log.warning("web: %s failed: %r", path, exc)
                self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"state database not readable now: {type(exc).__name__}",
                            head)
                return
            if len(body) > MAX_BODY:
                self._error(HTTPStatus.INSUFFICIENT_STORAGE, f"answer larger than {MAX_BODY} bytes; narrow the "
                                                             "query (states, user, jobs, n)", head)
                return
            self._send(HTTPStatus.OK, body, "application/json", head)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._get(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._get(head=True)

        def _refuse(self) -> None:
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} not allowed: this interface is read-only")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse  # noqa: N815

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("web: " + fmt, *args)

    return Handler


def serve(database: str | Path, listen: str, look: FirstLook | None = None) -> ThreadingHTTPServer:
    """Start the page and API on HOST:PORT (port 0 picks a free one) in a daemon thread, reading
    ``database`` read-only (and, with ``look``, Slurm's listing of the jobs the daemon has not seen yet)."""
    store = Store.open(database, read_only=True)
    server = start_http(listen, _handler(store, look), "web")
    log.info("web page and API on http://%s:%d/", *server.server_address[:2])
    return server
