"""`tsbatch`: sbatch for the tesserae-managed partition.

    tsbatch [--gpus N] [--model M [--batch-size B]] [--parallelism "S1;S2"] [--no-pack] [--no-profile]
            [--parsable] [--dry-run] [--config PATH] [sbatch options] script.sh [args ...]

The job is submitted held, requeueable, appending to its output, with the checkpoint signal the
daemon uses, and with its scheduling metadata in its Comment; the tesserae daemon starts it on the
nodes and GPUs it chooses. Bad input prints one line and exits 2 without submitting anything.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from ..model import InputError

EXIT_INPUT = 2
EXIT_SLURM = 1
USAGE = __doc__.split("\n\n")[1]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else EXIT_INPUT
    from ..daemon.config import resolve_config
    from ..daemon.connect import backend_from_config
    from ..slurm import SlurmError
    from ..tsbatch.submit import prepare, submit

    try:
        prepared, backend = prepare(args, backend_from_config, lambda path: resolve_config(path, check_policy=False)[0])
        if prepared.submission.dry_run:
            print(shlex.join(prepared.argv()))
            return 0
        job_id = submit(prepared, backend)
    except InputError as exc:
        print(f"tsbatch: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except SlurmError as exc:
        print(f"tsbatch: error: {exc}", file=sys.stderr)
        return EXIT_SLURM
    if prepared.submission.parsable:
        print(job_id)
    else:
        print(f"Submitted batch job {job_id} (held; the tesserae daemon starts it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
