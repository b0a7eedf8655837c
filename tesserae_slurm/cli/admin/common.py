"""Finding and opening the daemon's state database read-only (admin commands never write)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ...daemon.operators.readers import FirstLook
    from ...daemon.state.database import Database
    from ...daemon.state.store import Store

D = TypeVar("D")


def add_db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="state database (default $TESSERAE_DB, else the config's state.database)")
    p.add_argument("--config", default=None, help="daemon config to find the database in (default $TESSERAE_CONFIG, "
                                                  "else /etc/tesserae/tesserae.yaml)")


def add_api_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api", metavar="URL", default=None,
                   help="read through the daemon's read-only web API (e.g. http://127.0.0.1:9479) instead of the "
                        "database; used by itself when the database is not readable and the config has http.listen")


def open_store(args: argparse.Namespace) -> Store:
    from ...daemon.state.store import Store

    return Store.open(_db_path(args), read_only=True)


def open_database(args: argparse.Namespace) -> Database:
    """The database without the ORM (its import alone is a large part of a listing's time)."""
    from ...daemon.state.database import Database

    return Database.open(_db_path(args), read_only=True)


def _db_path(args: argparse.Namespace) -> str:
    path = args.db or os.environ.get("TESSERAE_DB")
    if not path:
        from ...site.load import resolve_config
        path = resolve_config(args.config, check_policy=False)[0].state.database
    return str(path)


def open_source(args: argparse.Namespace) -> Store | ApiClient:
    """The database for those who may read it (operators), else the daemon's API: --api URL, or the
    config's http.listen when the database is not readable by this user."""
    return _source(args, open_store)


def open_reader(args: argparse.Namespace) -> Database | ApiClient:
    """``open_source`` for the commands that read through ``Database`` alone (`tesserae jobs`)."""
    return _source(args, open_database)


def _source(args: argparse.Namespace, open_db: Callable[[argparse.Namespace], D]) -> D | ApiClient:
    if getattr(args, "api", None):
        return ApiClient(args.api)
    path = _db_path(args)
    try:
        os.stat(path)
        readable = os.access(path, os.R_OK)
    except FileNotFoundError:
        return open_db(args)  # says the database does not exist (has the daemon run yet?)
    except OSError:  # a state directory this user may not enter
        readable = False
    if readable:
        from sqlalchemy.exc import OperationalError

        try:
            return open_db(args)
        except OperationalError:
            pass  # readable file in an unreadable WAL setup (no -shm access): ask the daemon instead
    from ...model import InputError
    from ...site.load import resolve_config

    listen = resolve_config(args.config, check_policy=False)[0].http.listen
    if not listen:
        raise InputError(f"cannot read the state database {path} and the config has no http.listen; "
                         "ask an operator, or pass --api URL")
    host, _, port = listen.rpartition(":")
    return ApiClient(f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}", why=f"{path} not readable")


def first_look(args: argparse.Namespace) -> FirstLook | None:
    """Slurm's listing of the managed partition, for the jobs the daemon has not looked at yet; None
    where no config names the partition (``--db`` alone, as the benchmarks and tests read a copy)."""
    if args.db or os.environ.get("TESSERAE_DB"):
        if not (args.config or os.environ.get("TESSERAE_CONFIG")):
            return None
    from ...daemon.operators.readers import FirstLook
    from ...model import InputError
    from ...site.load import resolve_config

    try:
        return FirstLook(resolve_config(args.config, check_policy=False)[0])
    except InputError:
        return None


class ApiClient:
    """GET on the daemon's read-only JSON API (daemon/operators/web.py); errors become one-line InputErrors."""

    def __init__(self, url: str, why: str = "") -> None:
        from urllib.parse import urlsplit

        from ...model import InputError

        u = urlsplit(url if "://" in url else "http://" + url)
        if u.scheme != "http" or not u.hostname:
            raise InputError(f"--api: expected http://HOST:PORT, got {url!r}")
        self.host, self.port, self.base = u.hostname, u.port or 80, u.path.rstrip("/")
        self.url = f"http://{u.netloc}{self.base}"
        self.why = why

    def get(self, path: str, **query: str | None) -> dict[str, Any]:
        import http.client
        import json
        from urllib.parse import urlencode

        from ...model import InputError

        q = urlencode({k: v for k, v in query.items() if v})
        target = self.base + path + (f"?{q}" if q else "")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("GET", target)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            why = f" ({self.why})" if self.why else ""
            raise InputError(f"cannot reach the daemon's API at {self.url}{why}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        finally:
            conn.close()
        try:
            body = json.loads(raw)
        except ValueError:
            raise InputError(f"{self.url}{path}: not a tesserae API answer (HTTP {resp.status})") from None
        if resp.status != 200:
            raise InputError(str(body.get("error") if isinstance(body, dict) else body))
        if not isinstance(body, dict):
            raise InputError(f"{self.url}{path}: not a tesserae API answer (a JSON {type(body).__name__})")
        return body


def duration(seconds: float | None) -> str:
    """squeue's TIME style: [days-]hours:minutes:seconds, minutes:seconds under an hour."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
