"""Per-user and per-account GPU limits, as the site configures them (YAML ``limits:``, or a simulation's).

Only the data and the YAML reader; the engine applies them (placement/limit_gate.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import InputError
from .job import Job


@dataclass(frozen=True)
class GpuLimits:
    """GPUs a user or account may hold at once. ``default_user``/``default_account``: for every user
    (account) not named; None: unlimited."""

    users: Mapping[str, int] = field(default_factory=dict)
    accounts: Mapping[str, int] = field(default_factory=dict)
    default_user: int | None = None
    default_account: int | None = None

    def __post_init__(self) -> None:
        for what, caps in (("users", self.users), ("accounts", self.accounts)):
            for name, cap in caps.items():
                _check(f"limits.{what}.{name}", cap)
        for what, default in (("default_user", self.default_user), ("default_account", self.default_account)):
            if default is not None:
                _check(f"limits.{what}", default)

    @property
    def empty(self) -> bool:
        return not (self.users or self.accounts) and self.default_user is None and self.default_account is None

    def keys(self, job: Job) -> tuple[tuple[str, int], ...]:
        """The limits ``job`` counts against: ("user alice", 8), ("account ml", 16)."""
        out = []
        if job.user:
            cap = self.users.get(job.user, self.default_user)
            if cap is not None:
                out.append((f"user {job.user}", cap))
        if job.account:
            cap = self.accounts.get(job.account, self.default_account)
            if cap is not None:
                out.append((f"account {job.account}", cap))
        return tuple(out)


def _check(where: str, cap: object) -> None:
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise InputError(f"{where}: a GPU limit must be an integer >= 0, got {cap!r}")


def limits_from(raw: object, where: str = "") -> GpuLimits | None:
    """YAML ``{users: {alice: 8}, accounts: {ml: 16}, default_user: 4, default_account: 32}`` ->
    GpuLimits (None when it limits nothing); ``where`` (the file) prefixes the one-line errors."""
    at = f"{where}: " if where else ""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError(f"{at}limits must be a mapping, got {type(raw).__name__}")
    unknown = sorted(map(str, set(raw) - {"users", "accounts", "default_user", "default_account"}))
    if unknown:
        raise InputError(f"{at}limits: unknown key(s) {', '.join(unknown)} "
                         "(known: users, accounts, default_user, default_account)")
    maps = {}
    for name in ("users", "accounts"):
        value = raw.get(name) or {}
        if not isinstance(value, Mapping):
            raise InputError(f"{at}limits.{name} must map names to GPU counts, got {type(value).__name__}")
        maps[name] = {str(k): v for k, v in value.items()}
    try:
        limits = GpuLimits(maps["users"], maps["accounts"], raw.get("default_user"), raw.get("default_account"))
    except InputError as exc:
        raise InputError(f"{at}{exc}") from None
    return None if limits.empty else limits
