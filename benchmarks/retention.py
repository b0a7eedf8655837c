"""Benchmark: state database size and admin command latency after many rounds, with and without
retention (issue 22). The same as `tesserae bench retention` (`./dev bench retention`):

    .venv/bin/python benchmarks/retention.py [--rounds 10000] [--jobs 1000] [--nodes 64]
                                             [--rounds-days 7] [--jobs-days 7] [--max-rounds 0]
                                             [--repeats 3] [--dir DIR] [--json]

Rounds are 360 s apart, so 10,000 rounds span 41.7 days; two jobs end and two arrive every round.
Not a test: it writes two databases, about 1 GB together at the defaults.
"""

import sys

from tesserae_slurm.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "retention", *sys.argv[1:]]))
