"""systemd's notify protocol (sd_notify(3)) in a few lines of stdlib: READY=1, WATCHDOG=1, STOPPING=1 as
datagrams to $NOTIFY_SOCKET. Without that variable (not under systemd, or Type=simple) every call is a
no-op. The watchdog is pinged from the daemon's own loop (the pause between rounds, the waits inside a
round), never from a side thread: a loop that hangs must stop pinging so systemd restarts it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET", "")
        self.addr = ("\0" + addr[1:]) if addr.startswith("@") else addr  # "@name": Linux abstract namespace
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or (pid.isdigit() and int(pid) == os.getpid())
        self.watchdog_s = int(usec) / 1e6 if usec.isdigit() and int(usec) > 0 and mine and self.addr else 0.0
        self._last = 0.0

    @property
    def slice_s(self) -> float:
        """Longest wait between two pings: a third of the watchdog interval (1e9 without a watchdog)."""
        return self.watchdog_s / 3 if self.watchdog_s else 1e9

    def send(self, *fields: str) -> bool:
        if not self.addr:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.connect(self.addr)
                s.sendall("\n".join(fields).encode())
        except OSError:  # systemd gone or the socket unreadable: the service goes on, unsupervised
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def ping(self) -> None:
        """WATCHDOG=1, at most once per slice (callers may call it as often as they like)."""
        now = time.monotonic()
        if self.watchdog_s and now - self._last >= self.slice_s / 2:
            self._last = now
            self.send("WATCHDOG=1")

    def sleep(self, seconds: float) -> None:
        """time.sleep that keeps pinging: the daemon's waits inside a round (preemption grace) use it."""
        end = time.monotonic() + seconds
        while True:
            self.ping()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.slice_s))
