"""Job states in the daemon's own accounting (Slurm's state is kept beside them in slurm_state).

Apart from the tables so that the readers (and the CLI's API client) test states without SQLAlchemy.
"""

PENDING, STARTING, RUNNING, PREEMPTING, LOST = "PENDING", "STARTING", "RUNNING", "PREEMPTING", "LOST"
PLACED_STATES = (STARTING, RUNNING)  # the job holds GPUs in the daemon's accounting
TERMINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                   "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", LOST)
