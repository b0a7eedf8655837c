"""Admin actions: operators' hold/release/requeue/cancel/drain/resume requests, with who and when.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('admin_actions',
                    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
                    sa.Column('time', sa.Float(), nullable=False),
                    sa.Column('user', sa.String(), nullable=False),
                    sa.Column('uid', sa.Integer(), nullable=False),
                    sa.Column('command', sa.String(), nullable=False),
                    sa.Column('target', sa.String(), nullable=False),
                    sa.Column('status', sa.String(), nullable=False),
                    sa.Column('round_id', sa.Integer(), nullable=True),
                    sa.Column('note', sa.Text(), nullable=False),
                    sa.PrimaryKeyConstraint('id'))
    with op.batch_alter_table('admin_actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_admin_actions_target'), ['target'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('admin_actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_admin_actions_target'))
    op.drop_table('admin_actions')
