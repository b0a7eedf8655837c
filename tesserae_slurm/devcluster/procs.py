"""Process and port helpers for the dev cluster: free ports, /proc lookups, signalling by PID.

Processes are identified by PID *and* by carrying this cluster's SLURM_CONF in their
environment *and* by sharing this process's filesystem root, never by name alone, so a reused PID
or another cluster's daemons are left alone. The root matters because chroots share the PID
namespace: two Slurm lanes side by side (scripts/slurm-lane.sh) run clusters under the same
SLURM_CONF path in different Debian roots (docs/testing.md, "Live-test failures seen").
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import DevClusterError

PORT_SCAN_START = 20000
PORT_SCAN_END = 30000
# Where a caller picks ports that something binds only later (a walkthrough's page, a test daemon's
# metrics): no dev cluster scans here, so a cluster brought up in the meantime (this one's own, or a
# side-by-side lane's) cannot take them; below Linux's ephemeral range (32768+) for the same reason.
SERVICE_PORTS = (30000, 32768)


def port_is_free(port: int) -> bool:
    """True if nothing listens on `port` (TCP, all interfaces); TIME_WAIT does not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def check_ports_free(ports: Iterable[int]) -> None:
    busy = [p for p in ports if not port_is_free(p)]
    if busy:
        raise DevClusterError(f"ports already in use: {', '.join(map(str, busy))}; choose others or stop their owner")


def pick_free_ports(count: int, *, start: int | None = None,
                    scan: tuple[int, int] = (PORT_SCAN_START, PORT_SCAN_END)) -> tuple[int, ...]:
    """`count` consecutive free ports from `scan` (a dev cluster's [20000, 30000) by default), scanning
    from a PID-derived offset.

    Consecutive ports keep the generated slurm.conf readable; the PID offset keeps two clusters
    started at the same moment from probing the same block first.
    """
    low, high = scan
    span = high - low
    offset = (os.getpid() * 37) % span if start is None else start - low
    for step in range(0, span, count):
        base = low + (offset + step) % (span - count)
        block = tuple(range(base, base + count))
        if all(port_is_free(p) for p in block):
            return block
    raise DevClusterError(f"no {count} consecutive free TCP ports in [{low}, {high})")


def port_accepts(port: int, host: str = "127.0.0.1", timeout_s: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    # A zombie child still answers kill(0); treat it as dead.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def proc_environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def proc_comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def proc_parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[-1].split()[1])


def all_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def same_root(pid: int) -> bool:
    """Does process `pid` see the same filesystem root as this one (not another chroot)?"""
    try:
        mine, theirs = os.stat("/proc/self/root"), os.stat(f"/proc/{pid}/root")
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def belongs_to(pid: int, slurm_conf: str) -> bool:
    """Does process `pid` carry this cluster's SLURM_CONF in its environment, under this process's root?"""
    return proc_environ(pid).get("SLURM_CONF") == slurm_conf and same_root(pid)


def describe(pid: int) -> str:
    """`PID (comm, state S)` for error messages: what a process that would not go was doing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} ({proc_comm(pid)}, state {stat.rsplit(')', 1)[-1].split()[0]})"


def descendants(roots: Iterable[int]) -> list[int]:
    """All live descendants of `roots` (children first found by one /proc scan)."""
    parent_of = {pid: proc_parent(pid) for pid in all_pids()}
    wanted = set(roots)
    found: list[int] = []
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent_of.items():
            if ppid in wanted and pid not in wanted:
                wanted.add(pid)
                found.append(pid)
                changed = True
    return found


def protected_pids() -> set[int]:
    """This process and its ancestors: never signalled, whatever their environment says."""
    out: set[int] = set()
    pid: int | None = os.getpid()
    while pid and pid not in out:
        out.add(pid)
        pid = proc_parent(pid)
    return out


def signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait until all `pids` exit; return those still alive after `timeout_s`."""
    pending = list(pids)
    deadline = time.monotonic() + timeout_s
    while pending:
        _reap(pending)
        pending = [p for p in pending if pid_alive(p)]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return pending


def terminate(pids: Iterable[int], grace_s: float = 5.0) -> list[int]:
    """SIGTERM, wait up to `grace_s`, SIGKILL stragglers; return PIDs that were killed hard."""
    pids = [p for p in pids if pid_alive(p)]
    signal_pids(pids, signal.SIGTERM)
    stragglers = wait_gone(pids, grace_s)
    if stragglers:
        signal_pids(stragglers, signal.SIGKILL)
        wait_gone(stragglers, 2.0)
    return stragglers


def _reap(pids: Iterable[int]) -> None:
    """Collect exit status of our own children so they do not linger as zombies."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        except OSError:
            pass
