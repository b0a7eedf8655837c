"""The state database's schema versions (Alembic revisions); the daemon upgrades on start (``state/schema.py``)."""
