"""The site: its configuration file and what follows from it for every command that reads it.

Below the daemon, tsbatch, the admin commands and the page, so that none of them imports another for
it: the configuration (``config``, ``load``), the scheduler it names (``scheduler``), the managed
partition (``partition``), the Slurm backend (``backend``) and the rules a job's metadata must keep
(``job_rules``), which tsbatch applies before submitting and the daemon to every job every round.
"""
