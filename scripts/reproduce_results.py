#!/usr/bin/env python3
"""Regenerate docs/results.md: the paper's simulation comparisons, re-run with this code base.

The studies, the runner and the rendering are tesserae_slurm/results/; ``--help`` lists the options.
"""

import sys

from tesserae_slurm.results.cli import main

if __name__ == "__main__":
    sys.exit(main())
