"""A real Slurm cluster on this host for development and tests (`tesserae devcluster up`)."""

from .cli import add_parser
from .cluster import DevCluster, DevClusterStatus, env_for
from .errors import DevClusterError
from .install import ensure_slurm_installed

__all__ = ["DevCluster", "DevClusterError", "DevClusterStatus", "add_parser", "ensure_slurm_installed", "env_for"]
