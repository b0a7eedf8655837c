"""Admin actions' node list: `tesserae pin|keep-off JOB NODELIST` keeps its Slurm hostlist beside the job.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | Sequence[str] | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('admin_actions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('nodes', sa.Text(), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('admin_actions', schema=None) as batch_op:
        batch_op.drop_column('nodes')
