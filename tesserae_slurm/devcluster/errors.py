"""The dev cluster's one error type: its message is one line for the user."""


class DevClusterError(RuntimeError):
    """The dev cluster could not be installed, started or stopped; str(exc) says why."""
