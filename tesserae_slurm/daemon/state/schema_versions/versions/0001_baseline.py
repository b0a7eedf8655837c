"""Baseline: the schema tesserae used before migrations (kv ``schema_version`` = 2).

A database from then has these tables and no ``alembic_version``; the daemon stamps it 0001 and
upgrades from there (daemon/state/schema.py).

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('time', sa.Float(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('job_id', sa.String(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=True),
    sa.Column('message', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_time'), ['time'], unique=False)

    op.create_table('jobs',
    sa.Column('job_id', sa.String(), nullable=False),
    sa.Column('name', sa.String(), nullable=False),
    sa.Column('user', sa.String(), nullable=False),
    sa.Column('num_gpus', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(), nullable=False),
    sa.Column('batch_size', sa.String(), nullable=False),
    sa.Column('parallelism', sa.Text(), nullable=False),
    sa.Column('no_pack', sa.Boolean(), nullable=False),
    sa.Column('meta', sa.Text(), nullable=False),
    sa.Column('submit_time', sa.Float(), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('slurm_state', sa.String(), nullable=False),
    sa.Column('reason', sa.String(), nullable=False),
    sa.Column('attained_service', sa.Float(), nullable=False),
    sa.Column('executed_time', sa.Float(), nullable=False),
    sa.Column('run_start', sa.Float(), nullable=True),
    sa.Column('run_counted', sa.Float(), nullable=False),
    sa.Column('rounds_run', sa.Integer(), nullable=False),
    sa.Column('nodes', sa.String(), nullable=False),
    sa.Column('gpus', sa.String(), nullable=False),
    sa.Column('assignment', sa.Text(), nullable=False),
    sa.Column('assign_round', sa.Integer(), nullable=True),
    sa.Column('placed_at', sa.Float(), nullable=True),
    sa.Column('packed_with', sa.String(), nullable=False),
    sa.Column('strategy', sa.String(), nullable=False),
    sa.Column('restarts', sa.Integer(), nullable=False),
    sa.Column('preemptions', sa.Integer(), nullable=False),
    sa.Column('migrations', sa.Integer(), nullable=False),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('first_start', sa.Float(), nullable=True),
    sa.Column('last_seen', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('job_id')
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jobs_state'), ['state'], unique=False)

    op.create_table('kv',
    sa.Column('key', sa.String(), nullable=False),
    sa.Column('value', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('rounds',
    sa.Column('round_id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('started_at', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=True),
    sa.Column('policy', sa.String(), nullable=False),
    sa.Column('dry_run', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('scheduling_ms', sa.Float(), nullable=False),
    sa.Column('placement_ms', sa.Float(), nullable=False),
    sa.Column('packing_ms', sa.Float(), nullable=False),
    sa.Column('migration_ms', sa.Float(), nullable=False),
    sa.Column('decision_json', sa.Text(), nullable=False),
    sa.Column('observe_ms', sa.Float(), nullable=False),
    sa.Column('apply_ms', sa.Float(), nullable=False),
    sa.Column('jobs_active', sa.Integer(), nullable=False),
    sa.Column('running', sa.Integer(), nullable=False),
    sa.Column('started', sa.Integer(), nullable=False),
    sa.Column('preempted', sa.Integer(), nullable=False),
    sa.Column('migrated', sa.Integer(), nullable=False),
    sa.Column('kept', sa.Integer(), nullable=False),
    sa.Column('packed_pairs', sa.Integer(), nullable=False),
    sa.Column('pending', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('round_id')
    )
    op.create_table('slurm_calls',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=True),
    sa.Column('time', sa.Float(), nullable=False),
    sa.Column('method', sa.String(), nullable=False),
    sa.Column('job_ids', sa.String(), nullable=False),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('ms', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('slurm_calls', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_slurm_calls_round_id'), ['round_id'], unique=False)

    op.create_table('actions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=True),
    sa.Column('error', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.round_id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_actions_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_actions_round_id'), ['round_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_actions_status'), ['status'], unique=False)

    op.create_table('placements',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.String(), nullable=False),
    sa.Column('gpus', sa.String(), nullable=False),
    sa.Column('partner', sa.String(), nullable=False),
    sa.Column('strategy', sa.String(), nullable=False),
    sa.Column('speed', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.round_id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('placements', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_placements_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_placements_round_id'), ['round_id'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('placements', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_placements_round_id'))
        batch_op.drop_index(batch_op.f('ix_placements_job_id'))

    op.drop_table('placements')
    with op.batch_alter_table('actions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_actions_status'))
        batch_op.drop_index(batch_op.f('ix_actions_round_id'))
        batch_op.drop_index(batch_op.f('ix_actions_job_id'))

    op.drop_table('actions')
    with op.batch_alter_table('slurm_calls', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_slurm_calls_round_id'))

    op.drop_table('slurm_calls')
    op.drop_table('rounds')
    op.drop_table('kv')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jobs_state'))

    op.drop_table('jobs')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_time'))
        batch_op.drop_index(batch_op.f('ix_events_job_id'))

    op.drop_table('events')
