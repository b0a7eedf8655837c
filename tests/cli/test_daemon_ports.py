"""A port in use for metrics or the page is logged and the daemon schedules on (the jobs matter more
than their view); both ports took the same path since stop 42, metrics used to stop the daemon."""

from __future__ import annotations

import logging
import socket
import urllib.request

import pytest

from tesserae_slurm.cli.daemon_cmd import _serve
from tesserae_slurm.daemon.service.metrics import Metrics, serve


def test_a_metrics_port_in_use_is_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test-daemon-ports")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = f"127.0.0.1:{s.getsockname()[1]}"
        with caplog.at_level(logging.ERROR, logger=log.name):
            assert _serve("metrics", busy, lambda: serve(Metrics(), busy), log) is None
    assert f"metrics not started on {busy}" in caplog.text


def test_empty_listen_is_off_and_a_free_port_serves() -> None:
    log = logging.getLogger("test-daemon-ports")
    assert _serve("metrics", "", lambda: pytest.fail("started though off"), log) is None
    server = _serve("metrics", "127.0.0.1:0", lambda: serve(Metrics(), "127.0.0.1:0"), log)
    assert server is not None
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert "tesserae_rounds_total" in body
    finally:
        server.shutdown()
