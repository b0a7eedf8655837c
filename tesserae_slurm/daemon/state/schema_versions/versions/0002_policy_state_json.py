"""Policy state as versioned JSON instead of pickle (reading the database must never run code).

Converts every ``policy_state:*`` row once, through the unpickler that resolves only the policy state
classes; a state it cannot read is dropped (the policy starts afresh, as the daemon did before on
unreadable states) and said so in the events table. Also sets ``schema_version`` to 3, so a tesserae
from before migrations refuses this database instead of misreading it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""
import time
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

kv = sa.table("kv", sa.column("key", sa.String), sa.column("value", sa.LargeBinary))
events = sa.table("events", sa.column("time", sa.Float), sa.column("kind", sa.String),
                  sa.column("job_id", sa.String), sa.column("round_id", sa.Integer), sa.column("message", sa.Text))


def upgrade() -> None:
    from tesserae_slurm.policies import state_codec

    conn = op.get_bind()
    rows = conn.execute(sa.select(kv.c.key, kv.c.value).where(kv.c.key.like("policy_state:%"))).all()
    for key, raw in rows:
        if raw[:1] == b"{":
            continue  # already JSON
        try:
            new = state_codec.encode(state_codec.unpickle_legacy(raw))
        except Exception as exc:  # noqa: BLE001 - any unreadable old state: start that policy afresh
            conn.execute(sa.delete(kv).where(kv.c.key == key))
            conn.execute(sa.insert(events).values(time=time.time(), kind="migration", job_id="", round_id=None,
                                                  message=f"0002: dropped unreadable policy state {key}: {exc}"))
            continue
        conn.execute(sa.update(kv).where(kv.c.key == key).values(value=new))
    conn.execute(sa.delete(kv).where(kv.c.key == "schema_version"))
    conn.execute(sa.insert(kv).values(key="schema_version", value=b"3"))


def downgrade() -> None:
    raise NotImplementedError("0002 is one-way: restore the backup taken before the upgrade")
