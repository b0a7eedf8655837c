"""The daemon's side that people use: operators' requests (``admin``) and the read-only records the
admin commands, the JSON API and the web page show (``readers``, ``api``, ``web``, ``webui/``)."""
