"""systemd's notify protocol against a real Unix datagram socket: the Notifier alone, then the daemon
under it on the dev cluster (READY=1 once started, WATCHDOG=1 through the pause between rounds, STOPPING=1
on SIGTERM)."""

from __future__ import annotations

import os
import socket
import time

import pytest

from tesserae_slurm.daemon.service.sdnotify import Notifier

from .helpers import Env


def _listen(path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(0.05)
    return s


def _drain(s: socket.socket, seconds: float) -> list[str]:
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            out.append(s.recv(4096).decode())
        except TimeoutError:
            pass
    return out


def test_messages_reach_the_socket_and_the_watchdog_pings_while_sleeping(tmp_path):
    with _listen(tmp_path / "notify") as s:
        n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "300000",
                      "WATCHDOG_PID": str(os.getpid())})
        assert n.watchdog_s == 0.3 and n.slice_s == pytest.approx(0.1)
        assert n.ready("up")
        assert _drain(s, 0.1) == ["READY=1\nSTATUS=up"]
        n.sleep(0.6)
        pings = _drain(s, 0.1)
        assert set(pings) == {"WATCHDOG=1"} and 4 <= len(pings) <= 8, pings  # every slice (0.1 s), not more
        n.ping()
        n.ping()
        assert len(_drain(s, 0.1)) <= 1  # rate-limited: callers may ping as often as they like
        n.stopping()
        assert _drain(s, 0.1) == ["STOPPING=1"]


def test_abstract_socket_and_no_systemd(tmp_path):
    name = f"tesserae-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(0.05)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert _drain(s, 0.1) == ["READY=1"]
    quiet = Notifier({})
    assert not quiet.ready() and quiet.watchdog_s == 0 and quiet.slice_s == 1e9
    # the watchdog belongs to another process (WATCHDOG_PID): not ours to ping
    assert Notifier({"NOTIFY_SOCKET": str(tmp_path / "x"), "WATCHDOG_USEC": "1000",
                     "WATCHDOG_PID": "1"}).watchdog_s == 0
    assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "missing")}).ready()  # no listener: no error


@pytest.mark.slurm_live
def test_the_daemon_notifies_ready_watchdog_and_stopping(env: Env, tmp_path):
    from .test_service import Background

    env.write_config(scheduler={"round_seconds": 3})
    sock = tmp_path / "notify"
    with _listen(sock) as s:
        os.environ["NOTIFY_SOCKET"], os.environ["WATCHDOG_USEC"] = str(sock), "600000"
        try:
            daemon = Background(env)
        finally:
            del os.environ["NOTIFY_SOCKET"], os.environ["WATCHDOG_USEC"]
        try:
            got: list[str] = []
            deadline = time.monotonic() + 60
            while not any(m.startswith("READY=1") for m in got) and time.monotonic() < deadline:
                got += _drain(s, 0.2)
            assert any(m.startswith("READY=1") for m in got), (got, daemon.text()[-2000:])
            daemon.wait_log(r"round \d+ applied")
            pings = _drain(s, 2.0)  # inside the 3 s pause: a ping every 0.2 s at most, 0.1 s at least
            assert pings.count("WATCHDOG=1") >= 5, pings
        finally:
            code = daemon.stop()
        assert code == 0, daemon.text()[-2000:]
        assert "STOPPING=1" in _drain(s, 0.3)
