"""Per-job progress: the speed of each placement and the work done at it (Tiresias service by progress).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # a job that ran before the upgrade counts its past wall time as work at full speed: the speeds
    # it ran at were not kept
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('speed', sa.Float(), nullable=False, server_default='1.0'))
        batch_op.add_column(sa.Column('work_done', sa.Float(), nullable=False, server_default='0.0'))
    op.execute("UPDATE jobs SET work_done = executed_time")


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('work_done')
        batch_op.drop_column('speed')
