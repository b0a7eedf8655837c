"""Alembic migrations of the state database; the daemon runs them on start (daemon/schema.py)."""
