#!/usr/bin/env bash
# Install the Debian Slurm packages the dev cluster and tests/slurm need (Slurm 22.05 on Debian 12).
# Nothing is started or enabled: the dev cluster runs its own daemons (`tesserae devcluster up`).
# Idempotent: does nothing when the binaries are already there. Needs root (or sudo).
set -euo pipefail

need=(slurmctld slurmd munged squeue sinfo sbatch scontrol)
missing=()
for b in "${need[@]}"; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing+=("$b")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "Slurm already installed: $(/usr/sbin/slurmd -V 2>/dev/null || echo unknown version)"
  exit 0
fi
echo "missing: ${missing[*]}; installing slurmctld slurmd slurm-client munge"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: not root and no sudo" >&2; exit 1; }
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge
/usr/sbin/slurmd -V
