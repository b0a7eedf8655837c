"""The daemon's round, one module per step, in the order ``loop.Daemon._round`` runs them:

observe (``observe``: Slurm -> Snapshot) -> reconcile (``reconcile``, by the rules of ``transitions``)
-> operators' requeue and cancel (``carry_out``) -> guard (``guard``: users cannot bypass the daemon)
-> feedback (``throughput``) -> inputs (``inputs``) -> decide (``decide``: rank, place, plan the
``actions``) -> record (``record``) -> apply (``apply``, through ``stop_start``) -> outcome (``outcome``).
"""
