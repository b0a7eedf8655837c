"""`python -m tesserae_slurm.harness launch -- CMD`: the job-side launcher without the console script."""

import sys

from .launcher import run

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["launch"]:
        args = args[1:]
    sys.exit(run(args))
