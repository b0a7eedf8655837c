"""The daemon as a service: systemd's notify protocol (``sdnotify``), JSON logs (``logfmt``), Prometheus
metrics (``metrics``), the audit trail of Slurm calls (``calls``) and crash-test fail points
(``failpoints``)."""
