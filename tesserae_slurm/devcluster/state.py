"""The dev cluster's state file (ports and daemon PIDs) and the status report built from it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DevClusterError


@dataclass(frozen=True)
class DevClusterStatus:
    """What `status()` found: each recorded daemon with its PID and liveness, plus sinfo."""

    root: Path
    slurm_conf: Path
    daemons: tuple[tuple[str, int | None, bool], ...]
    sinfo: str
    up: bool

    def render(self) -> str:
        lines = [f"dev cluster at {self.root} ({'up' if self.up else 'not up'})", f"SLURM_CONF={self.slurm_conf}"]
        for name, pid, alive in self.daemons:
            lines.append(f"  {name:<16} pid={pid if pid is not None else '-':<8} {'alive' if alive else 'dead'}")
        lines.append(self.sinfo.rstrip())
        return "\n".join(lines)


@dataclass
class DevClusterState:
    """The JSON state file: conf path, ports and recorded daemon PIDs."""

    slurm_conf: str
    ctld_port: int
    slurmd_ports: list[int]
    nodes: list[str]
    partition: str
    pids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> DevClusterState | None:
        try:
            raw = json.loads(path.read_text())
            return cls(**raw)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            raise DevClusterError(f"{path}: unreadable dev cluster state ({exc})") from exc

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=2, sort_keys=True))
        tmp.replace(path)
