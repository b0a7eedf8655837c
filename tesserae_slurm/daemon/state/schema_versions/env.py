"""Alembic environment: the caller (state/schema.py) hands over an open connection; no alembic.ini."""

from alembic import context

from tesserae_slurm.daemon.state.store import Base

connection = context.config.attributes["connection"]
# batch mode: SQLite alters a table by copying it, which Alembic does for us when asked.
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
