"""The state database's tables in SQLAlchemy Core: the one definition of the schema.

The daemon's ORM rows (``store``) are mapped onto these tables; the read commands (`tesserae jobs`,
the page's job list) read them through ``database`` without loading the ORM, whose import and per-row
objects were most of a listing's time. Migrations (``schema_versions``) must produce exactly this.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Column, Float, ForeignKey, Integer, LargeBinary, MetaData, String, Table, Text

from .job_states import PENDING

metadata = MetaData()


def _col(name: str, type_: Any, *args: Any, null: bool = False, **kw: Any) -> Column[Any]:
    """A column, NOT NULL unless ``null``."""
    return Column(name, type_, *args, nullable=null, **kw)


jobs = Table(
    "jobs", metadata,
    _col("job_id", String, primary_key=True),  # Slurm job id
    _col("name", String, default=""),
    _col("user", String, default=""),
    _col("num_gpus", Integer),
    _col("model", String, default=""),
    _col("batch_size", String, default=""),
    _col("parallelism", Text, default="[]"),  # JSON list
    _col("no_pack", Boolean, default=False),
    _col("meta", Text, default=""),  # the job's tesserae Comment as first seen
    _col("submit_time", Float),
    _col("state", String, default=PENDING, index=True),
    _col("slurm_state", String, default=""),
    _col("reason", String, default=""),
    _col("attained_service", Float, default=0.0),  # GPU-seconds
    _col("executed_time", Float, default=0.0),  # wall seconds run (Slurm times)
    _col("run_start", Float, null=True),  # Slurm start of the run counted
    _col("run_counted", Float, default=0.0),  # seconds of that run already counted
    # normalized speed of the current placement (the round's decision: 1 alone on its best GPU type, the
    # pair's speed when packed); each counted second adds that many seconds of work to work_done
    _col("speed", Float, default=1.0),
    _col("work_done", Float, default=0.0),  # seconds of work at the best speed alone
    _col("rounds_run", Integer, default=0),
    _col("nodes", String, default=""),  # comma-joined physical nodes
    _col("gpus", String, default=""),  # "node1:0-1;node2:0-3"
    _col("assignment", Text, default=""),  # encoded Assignment set in AdminComment
    _col("assign_round", Integer, null=True),
    _col("placed_at", Float, null=True),  # when the daemon released it
    _col("packed_with", String, default=""),
    _col("strategy", String, default=""),
    _col("restarts", Integer, default=0),  # Slurm's restart count
    _col("preemptions", Integer, default=0),
    _col("migrations", Integer, default=0),
    _col("exit_code", Integer, null=True),
    _col("first_start", Float, null=True),
    _col("last_seen", Float, default=0.0),
    _col("finished_at", Float, null=True),
)

rounds = Table(
    "rounds", metadata,
    _col("round_id", Integer, primary_key=True, autoincrement=True),
    _col("started_at", Float),
    _col("finished_at", Float, null=True),
    _col("policy", String),
    _col("dry_run", Boolean, default=False),
    _col("status", String, default="planned"),  # planned|applied|failed|skipped
    # round | start: a start between rounds (round/start_between.py), which only starts jobs on free GPUs
    _col("kind", String, default="round", server_default="round"),
    _col("error", Text, default=""),
    _col("scheduling_ms", Float, default=0.0),
    _col("placement_ms", Float, default=0.0),
    _col("packing_ms", Float, default=0.0),
    _col("migration_ms", Float, default=0.0),
    _col("decision_json", Text, default="{}"),  # model.codec.decision_to_json
    _col("observe_ms", Float, default=0.0),
    _col("apply_ms", Float, default=0.0),
    _col("jobs_active", Integer, default=0),
    _col("running", Integer, default=0),
    _col("started", Integer, default=0),
    _col("preempted", Integer, default=0),
    _col("migrated", Integer, default=0),
    _col("kept", Integer, default=0),
    _col("packed_pairs", Integer, default=0),
    _col("pending", Integer, default=0),
)

placements = Table(
    "placements", metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("round_id", Integer, ForeignKey("rounds.round_id"), index=True),
    _col("job_id", String, index=True),
    _col("gpus", String),
    _col("partner", String, default=""),
    _col("strategy", String, default=""),
    _col("speed", Float, default=0.0),
)

actions = Table(
    "actions", metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("round_id", Integer, ForeignKey("rounds.round_id"), index=True),
    _col("seq", Integer),  # order of execution within the round
    _col("job_id", String, index=True),
    _col("kind", String),  # start|preempt|migrate|hold (reconcile: requeue|hold)
    # intent|done|failed|skipped|interrupted (a crash left it as intent; the next start reconciled it)
    _col("status", String, default="intent", index=True),
    _col("detail", Text, default="{}"),  # JSON: target gpus, partner, strategy ...
    _col("created_at", Float),
    _col("finished_at", Float, null=True),
    _col("error", Text, default=""),
)

events = Table(
    "events", metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("time", Float, index=True),
    _col("kind", String),
    _col("job_id", String, default="", index=True),
    _col("round_id", Integer, null=True),
    _col("message", Text, default=""),
)

# Every Slurm call that changes something (place, release, signal, ...), for audit and `round show`.
slurm_calls = Table(
    "slurm_calls", metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("round_id", Integer, null=True, index=True),
    _col("time", Float),
    _col("method", String),
    _col("job_ids", String, default=""),  # comma-joined
    _col("ok", Boolean, default=True),
    _col("error", Text, default=""),
    _col("ms", Float, default=0.0),
)

# Small daemon state that is not a table: schema version, policy state, shadow placement.
kv = Table(
    "kv", metadata,
    _col("key", String, primary_key=True),
    _col("value", LargeBinary),
)

# An operator's request (`tesserae hold|release|requeue|cancel|pin|keep-off|unpin|drain|resume`) as the
# daemon took it in: who (the request file's owner, set by the kernel) and when, and what became of it.
admin_actions = Table(
    "admin_actions", metadata,
    _col("id", Integer, primary_key=True, autoincrement=True),
    _col("time", Float),  # when the operator asked (the request's own stamp)
    _col("user", String),
    _col("uid", Integer),
    _col("command", String),  # hold|release|requeue|cancel|pin|keep-off|unpin|drain|resume
    _col("target", String, index=True),  # job id or node name
    _col("status", String, default="accepted"),  # accepted|refused|done|failed
    _col("round_id", Integer, null=True),  # round that took it in
    _col("note", Text, default=""),
    _col("nodes", Text, default="", server_default=""),  # pin|keep-off: Slurm hostlist
)
