"""Operators' requests: `tesserae hold|release|requeue|cancel|pin|keep-off|unpin JOB` and
`drain|resume NODE`, from the command that writes one to what each round keeps in force.

Only the daemon writes the state database, so a command leaves a small JSON file in
``admin.requests_dir`` and the daemon takes it in at its next round, recording *who* as the file's
owner, which the kernel sets and the request cannot change. Operators are root, the daemon's own
user and ``admin.operators``. docs/daemon.md, "Operators' actions", says what each request does.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import re
import stat
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...model import InputError

if TYPE_CHECKING:
    from ...placement.node_rules import NodeRule
    from ...site.config import SiteConfig
    from ..state.store import AdminRow, Store

log = logging.getLogger(__name__)

JOB_COMMANDS = ("hold", "release", "requeue", "cancel", "pin", "keep-off", "unpin")
RULE_COMMANDS = ("pin", "keep-off")  # the ones that take a node list
NODE_COMMANDS = ("drain", "resume")
COMMANDS = JOB_COMMANDS + NODE_COMMANDS
MAX_REQUEST_BYTES = 4096
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def requests_dir(cfg: SiteConfig) -> Path:
    return Path(cfg.admin.requests_dir) if cfg.admin.requests_dir else \
        Path(cfg.state.database).expanduser().parent / "requests"


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def is_operator(uid: int, cfg: SiteConfig, daemon_uid: int | None = None) -> bool:
    return uid == 0 or uid == (os.geteuid() if daemon_uid is None else daemon_uid) or \
        user_name(uid) in cfg.admin.operators


def check_target(command: str, target: str, nodes: str = "") -> None:
    if command not in COMMANDS:
        raise InputError(f"unknown admin command {command!r}; known: {', '.join(COMMANDS)}")
    if command in JOB_COMMANDS and not target.isdigit():
        raise InputError(f"job id must be a number, got {target!r}")
    if command in NODE_COMMANDS and not _NODE.match(target):
        raise InputError(f"not a node name: {target!r}")
    if command in RULE_COMMANDS:
        node_names(nodes)
    elif nodes:
        raise InputError(f"{command} takes no node list")


FIRST_LOOK_STATE = "NEW"  # a job Slurm lists in the partition that the daemon has not looked at yet


def misfit(command: str, target: str, nodes: str, state: str | None, force: Mapping[str, Sequence[Mapping[str, Any]]],
           known_nodes: Collection[str] | None, partition: str = "") -> str:
    """Why a request does not fit what is known now ("" when it does): an unknown job or node, an ended
    job, a job in a state the action does not fit, nothing in force to lift. ``state``: the job's state in
    the database, FIRST_LOOK_STATE, or None when neither the database nor Slurm's partition holds it;
    ``force``: readers.in_force; ``known_nodes``: the partition's nodes (None: not checked)."""
    from ..state.store import PREEMPTING, RUNNING, TERMINAL_STATES

    by = {kind: {r["target"]: r for r in rows} for kind, rows in force.items()}

    def who(r: Mapping[str, Any]) -> str:
        return f"by {r['user']} at {r['time']}"

    where = f" partition {partition}" if partition else " the partition"
    if command in JOB_COMMANDS:
        if state is None:
            return f"job {target} is not a tesserae job: not in the daemon's database nor in{where}"
        if state in TERMINAL_STATES:
            return f"job {target} has ended ({state})"
        held = by.get("holds", {}).get(target)
        if command == "hold" and held:
            return f"job {target} is already held ({who(held)}); `tesserae release {target}` schedules it again"
        if command == "release" and not held:
            return f"job {target} is not held with `tesserae hold` (a hold in Slurm is lifted with `scontrol release`)"
        if command == "requeue" and state != RUNNING:
            what = "already being stopped" if state == PREEMPTING else f"not running ({state.lower()})"
            return f"job {target} is {what}: nothing to requeue"
        if command == "unpin" and target not in by.get("rules", {}):
            return f"job {target} has no pin or keep-off to lift"
    names = (target,) if command in NODE_COMMANDS else node_names(nodes) if command in RULE_COMMANDS else ()
    unknown = [n for n in names if known_nodes is not None and n not in known_nodes]
    if unknown:
        return f"no node {', '.join(unknown)} in{where} (its nodes: {_hostlist(known_nodes or ())})"
    drained = by.get("drains", {}).get(target)
    if command == "drain" and drained:
        return f"node {target} is already drained for tesserae ({who(drained)})"
    if command == "resume" and not drained:
        return f"node {target} is not drained for tesserae"
    return ""


def _hostlist(names: Collection[str]) -> str:
    shown = sorted(names)
    return ", ".join(shown[:8]) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "") if shown else "none"


def node_names(nodes: str) -> tuple[str, ...]:
    """The node names of a Slurm hostlist (``node[1-3],gpu7``); one line on anything else."""
    from ...slurm.parse import SlurmParseError, parse_nodelist

    try:
        names = parse_nodelist(nodes) if len(nodes) <= 1024 else ()
    except SlurmParseError as exc:
        raise InputError(f"not a node list: {exc}") from None
    if not names or len(names) > 4096 or not all(_NODE.match(n) for n in names):
        raise InputError(f"not a node list: {nodes[:100]!r}")
    return names


def ensure_dir(d: Path) -> None:
    """The requests directory: the daemon's, group-writable, sticky, not listable by the group."""
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o1730)


def submit(cfg: SiteConfig, command: str, target: str, now: float | None = None, nodes: str = "") -> Path:
    """Write one request (the CLI's side); the caller has checked the operator and the target."""
    d = requests_dir(cfg)
    now = time.time() if now is None else now
    doc: dict[str, object] = {"command": command, "target": target, "time": now}
    if nodes:
        doc["nodes"] = nodes
    body = json.dumps(doc).encode()
    path = d / f"{time.time_ns()}-{os.getpid()}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileNotFoundError:
        raise InputError(f"no requests directory {d}: has the daemon started with this config?") from None
    except PermissionError:
        raise InputError(f"cannot write to {d}: operators must be in the daemon's group (docs/daemon.md)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    os.chmod(path, 0o644)  # whatever the umask: the daemon must read it
    return path


@dataclass(frozen=True)
class Request:
    path: Path
    uid: int
    command: str
    target: str
    time: float
    problem: str = ""
    nodes: str = ""


def _read(path: Path) -> Request:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return Request(path, st.st_uid, "?", "?", st.st_mtime, "not a regular file")
    if st.st_size > MAX_REQUEST_BYTES:
        return Request(path, st.st_uid, "?", "?", st.st_mtime, "request too large")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read(MAX_REQUEST_BYTES))
        command, target, t = str(doc["command"]), str(doc["target"]), float(doc["time"])
        nodes = str(doc.get("nodes", ""))
        check_target(command, target, nodes)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InputError) as exc:
        return Request(path, st.st_uid, "?", "?", st.st_mtime, f"unreadable request: {exc}"[:200])
    return Request(path, st.st_uid, command, target, t, nodes=nodes)


def ingest(store: Store, cfg: SiteConfig, round_id: int | None, daemon_uid: int | None = None) -> list[AdminRow]:
    """Take every waiting request in (oldest first), record it, remove its file; returns the new rows."""
    from ..state.store import AdminRow

    d = requests_dir(cfg)
    try:
        names = sorted(p for p in os.listdir(d) if p.endswith(".json"))
    except FileNotFoundError:
        return []
    rows = []
    for name in names:
        req = _read(d / name)
        problem = req.problem
        if not problem and not is_operator(req.uid, cfg, daemon_uid):
            problem = f"{user_name(req.uid)} is not an operator (admin.operators)"
        rows.append(AdminRow(time=req.time, user=user_name(req.uid), uid=req.uid, command=req.command,
                             target=req.target, status="refused" if problem else "accepted", round_id=round_id,
                             note=problem, nodes=req.nodes))
        try:
            os.unlink(d / name)
        except FileNotFoundError:
            pass
    if rows:
        store.add_admin_actions(rows)
    for r in rows:  # the daemon's log says when each took effect (logfmt: job, action, outcome)
        kind = "job" if r.command in JOB_COMMANDS else "node"
        what = f"{r.command} {kind} {r.target}" + (f" {r.nodes}" if r.nodes else "")
        log.info("operator %s: %s %s%s", r.user, what, r.status, f" ({r.note})" if r.note else "",
                 extra={"job": r.target if r.command in JOB_COMMANDS else None, "action": f"operator-{r.command}",
                        "outcome": r.status})
    return rows


@dataclass(frozen=True)
class Standing:
    """What operators' requests mean for this round."""

    holds: dict[str, AdminRow]  # job -> the hold in force
    drains: dict[str, AdminRow]  # node -> the drain in force
    once: list[AdminRow]  # requeue/cancel accepted and not carried out yet
    rules: dict[str, AdminRow] = field(default_factory=dict)  # job -> the pin or keep-off in force


def take_requests(store: Store, cfg: SiteConfig, round_id: int) -> Standing:
    """The round's first step: take in the requests left since the last round, then what is in force."""
    ingest(store, cfg, round_id)
    return standing(store)


def standing(store: Store) -> Standing:
    holds: dict[str, AdminRow] = {}
    drains: dict[str, AdminRow] = {}
    once: list[AdminRow] = []
    rules: dict[str, AdminRow] = {}
    for r in store.admin_actions(statuses=("accepted", "done")):
        if r.command == "hold":
            holds[r.target] = r
        elif r.command == "release":
            holds.pop(r.target, None)
        elif r.command == "drain":
            drains[r.target] = r
        elif r.command == "resume":
            drains.pop(r.target, None)
        elif r.command in RULE_COMMANDS:
            rules[r.target] = r
        elif r.command == "unpin":
            rules.pop(r.target, None)
        elif r.status == "accepted":
            once.append(r)
    return Standing(holds, drains, once, rules)


def node_rules(st: Standing, jobs: Iterable[str]) -> dict[str, NodeRule]:
    """The engine's node rules for the jobs in ``jobs`` that have one. A row whose node list does not
    parse (checked when taken in, so only a hand-edited database) is logged and left out: it must not
    fail every round."""
    from ...placement.node_rules import NodeRule

    out: dict[str, NodeRule] = {}
    for j in jobs:
        r = st.rules.get(j)
        if r is None:
            continue
        try:
            out[j] = NodeRule(frozenset(node_names(r.nodes)), r.command == "keep-off", rule_text(r))
        except InputError as exc:
            log.error("job %s: operator action %d ignored: %s", j, r.id, exc)
    return out


def rule_text(row: AdminRow) -> str:
    verb = "pinned to" if row.command == "pin" else "kept off"
    return f"{verb} {row.nodes} by {row.user} ({_when(row.time)}); `tesserae unpin` to lift it"


def drain_reasons(st: Standing) -> dict[str, str]:
    """node -> why it is left out: the drains in force, as the round's snapshot shows them."""
    return {node: f"drained for tesserae by {row.user} ({_when(row.time)})" for node, row in st.drains.items()}


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def hold_reason(row: AdminRow) -> str:
    return f"held by {row.user} with `tesserae hold` ({_when(row.time)}); `tesserae release` to schedule it again"
