"""tesserae-slurm: Tesserae placement policies for DL jobs on Slurm GPU clusters."""

__version__ = "0.1.0"
