"""What the daemon knows between rounds, in one SQLite file: the tables (``tables``, in SQLAlchemy Core)
and the job states (``job_states``); opening the file and the reads without ORM objects (``database``);
the ORM rows the daemon writes (``store``), the writes of each step of the protocol (``journal``), the
schema's versions (``schema``, Alembic's ``schema_versions/``), pruning (``retention``) and the text
form of GPU sets (``gpuset``)."""
