"""Online feedback: running jobs report their throughput; the daemon checks the reports against its
records (``report_files``), folds them across rounds (``online``, over ``estimators/online.py``) and
says where each speed of a decision came from (``provenance``). docs/profiling.md, "Online feedback"."""
