"""The shipped systemd unit: Type=notify with a watchdog, and `systemd-analyze security` (offline, on
the file as shipped) at 4.0 or below."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "tesserae.service"


def _settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_notify_with_watchdog_and_what_slurm_needs_stays_open():
    s = _settings()
    assert s["Type"] == ["notify"] and int(s["WatchdogSec"][0]) > 0 and s["NotifyAccess"] == ["main"]
    families = s["RestrictAddressFamilies"][0].split()
    assert {"AF_UNIX", "AF_INET", "AF_INET6"} <= set(families)  # munge socket; slurmctld, /metrics, web page
    assert "/var/lib/tesserae" in s["ReadWritePaths"][0] and s["StateDirectory"] == ["tesserae"]
    assert "PrivateUsers" not in s and "PrivateNetwork" not in s  # report ownership checks; slurmctld over TCP
    assert "MemoryDenyWriteExecute" not in s  # numba's JIT


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_security_offline_rates_the_unit_at_most_4():
    out = subprocess.run(["systemd-analyze", "security", "--offline=true", str(UNIT)], capture_output=True,
                         text=True, timeout=60, check=False)
    if "--offline" in out.stderr and "unrecognized" in out.stderr:
        pytest.skip("this systemd-analyze has no --offline (systemd < 252)")
    m = re.search(r"Overall exposure level for tesserae\.service: ([\d.]+)", out.stdout)
    assert m, out.stdout[-2000:] + out.stderr
    assert float(m.group(1)) <= 4.0, out.stdout
