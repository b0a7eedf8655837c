"""Slurm layer and dev cluster tests (a package, so module names cannot clash with other test folders)."""
