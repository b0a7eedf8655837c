#!/usr/bin/env bash
# Install tesserae-slurm for every user of a machine: a virtual environment on the system's python3 under
# PREFIX (default /opt/tesserae-slurm), the package copied in (not an editable link into a checkout, which
# other users may not be able to read), `tesserae` and `tsbatch` linked into BINDIR (default
# /usr/local/bin), and /etc/profile.d/tesserae-slurm.sh setting TESSERAE_PYTHON, so jobs run the launcher
# with this Python. The systemd unit (systemd/tesserae.service) runs PREFIX/bin/tesserae. docs/daemon.md,
# "Install for a site".
#
#   scripts/install-site.sh [--prefix DIR] [--bin-dir DIR|--no-links] [--no-profile] [--extras LIST]
#                           [--source PATH_OR_WHEEL] [PIP ARGS...]
#
# --extras: the package's extras (default "daemon": the admin commands and the daemon; job nodes that run
# torch add "torch"). --source: the checkout or a built wheel (default: this checkout). Rerunning upgrades
# in place. Needs root for the default paths; pip reaches PyPI or the index pip.conf names.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=/opt/tesserae-slurm
bindir=/usr/local/bin
profile=/etc/profile.d/tesserae-slurm.sh
extras=daemon
source=$here
pip_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?"--prefix needs a directory"}; shift 2 ;;
        --bin-dir) bindir=${2:?"--bin-dir needs a directory"}; shift 2 ;;
        --no-links) bindir=""; shift ;;
        --no-profile) profile=""; shift ;;
        --extras) extras=${2?"--extras needs a list (may be empty)"}; shift 2 ;;
        --source) source=${2:?"--source needs a checkout or a wheel"}; shift 2 ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; pip_args+=("$@"); break ;;
        *) pip_args+=("$1"); shift ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install-site: --prefix must be an absolute path, got '$prefix'" >&2; exit 2 ;; esac
[ -e "$source" ] || { echo "install-site: --source $source: no such file or directory" >&2; exit 2; }
python=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3 || true)
if [ -z "$python" ] || ! "$python" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "install-site: the system's python3 >= 3.11 is required" >&2; exit 2
fi
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

umask 022  # everything installed readable by every user
[ -x "$prefix/bin/python" ] || "$python" -m venv "$prefix"
spec=$source
[ -n "$extras" ] && spec="$source[$extras]"
"$prefix/bin/python" -m pip install -q --disable-pip-version-check --upgrade \
    "${pip_args[@]}" "$spec" 2>&1 | { grep -v "^WARNING: Location" || true; }
"$prefix/bin/python" -I - "$prefix" <<'EOF'
import sys, tesserae_slurm
from pathlib import Path
where = Path(tesserae_slurm.__file__).resolve()
if not where.is_relative_to(Path(sys.argv[1]).resolve()):  # an editable install would point elsewhere
    sys.exit(f"install-site: tesserae_slurm resolves to {where}, outside {sys.argv[1]}")
EOF
chmod -R a+rX "$prefix"

if [ -n "$bindir" ]; then
    mkdir -p "$bindir"
    for tool in tesserae tsbatch; do ln -sfn "$prefix/bin/$tool" "$bindir/$tool"; done
fi
if [ -n "$profile" ]; then
    mkdir -p "$(dirname "$profile")"
    printf '# written by tesserae-slurm scripts/install-site.sh: jobs run the launcher with the site install\nexport TESSERAE_PYTHON=%s\n' \
        "$prefix/bin/python" >"$profile"
fi
version=$("$prefix/bin/python" -I -c 'import tesserae_slurm; print(tesserae_slurm.__version__)')
echo "installed tesserae-slurm $version in $prefix (extras: ${extras:-none})${bindir:+; tesserae and tsbatch linked in $bindir}"
