"""The daemon's round, one module per step, in the order ``loop.Daemon._round`` runs them (after taking in
operators' requests): 1 ``observe`` (Slurm -> Snapshot), 2 ``reconcile`` (by the rules of
``transitions``), 3 ``carry_out`` (operators' requeue and cancel), 4 ``guard`` (users cannot bypass the
daemon), 5 ``throughput`` (online feedback), 6 ``inputs``, 7 ``decide`` (rank, place, plan the
``actions``), 8 ``record``, 9 ``apply`` (through ``stop_start``), 10 ``outcome``. docs/daemon.md, "The round".
"""
