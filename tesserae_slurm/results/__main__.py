"""``python -m tesserae_slurm.results``: regenerate docs/results.md."""

import sys

from .cli import main

sys.exit(main())
