#!/usr/bin/env bash
# The host's Slurm (Debian 12: 22.05) through the pyslurm backend: `./dev test --slurm 22.05 --backend pyslurm`.
#
#   TESSERAE_PYSLURM_SRC=DIR|SDIST scripts/pyslurm-host-lane.sh [PYTEST ARGS]
#
# pyslurm is built from TESSERAE_PYSLURM_SRC (a checkout of PySlurm/pyslurm's 22.5.x branch, or its sdist:
# PyPI has none, docs/slurm-versions.md) against the host's libslurm-dev, into a venv of its own
# (.venv-pyslurm), so that `auto` in the project's .venv never meets it; rebuilt when the source changes.
# Then the live tests whose outcome depends on the release (every_release) run through it, one pytest
# per test directory (each has its own cluster, and pyslurm serves one slurm.conf per process), with the
# torch-free job payload. Needs root (apt-get) and Slurm installed (scripts/install-slurm.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$repo/.venv-pyslurm
die() { echo "pyslurm-host-lane: $*" >&2; exit 1; }

src=${TESSERAE_PYSLURM_SRC:-}
[ -n "$src" ] || die "needs TESSERAE_PYSLURM_SRC: pyslurm's 22.05 source (a checkout of PySlurm/pyslurm's 22.5.x
branch, or its sdist). PyPI has none for Slurm 22.05 (docs/slurm-versions.md)"
[ -e "$src" ] || die "TESSERAE_PYSLURM_SRC=$src does not exist"
src=$(realpath "$src")

digest() {  # the content of a source tree (without .git and build outputs) or of a file
    if [ -d "$1" ]; then
        tar -C "$1" --exclude=.git --exclude='*.so' --exclude='*.c' --exclude=build --sort=name --mtime=@0 \
            --owner=0 --group=0 --numeric-owner -cf - . | sha256sum | cut -d' ' -f1
    else
        sha256sum "$1" | cut -d' ' -f1
    fi
}

want_project="$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1) $repo"
have_project=""; [ ! -f "$venv/.tesserae-stamp" ] || have_project=$(cat "$venv/.tesserae-stamp")
if [ "$want_project" != "$have_project" ]; then
    echo "pyslurm-host-lane: installing the project into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$repo[test,daemon]" 2>&1 \
        | { grep -v "^WARNING: Location" || true; }
    echo "$want_project" >"$venv/.tesserae-stamp"
fi

want=$(digest "$src"); have=""
[ ! -f "$venv/.pyslurm-stamp" ] || have=$(cat "$venv/.pyslurm-stamp")
if [ "$want" != "$have" ] || ! "$venv/bin/python" -m pip show -q pyslurm >/dev/null 2>&1; then
    if [ "$(dpkg-query -W -f='${Status}\n' libslurm-dev gcc libc6-dev 2>/dev/null | grep -c '^install ok installed$')" -ne 3 ]; then
        echo "pyslurm-host-lane: installing libslurm-dev and a compiler"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libslurm-dev gcc libc6-dev >/dev/null
    fi
    log=$venv/pyslurm-build.log
    echo "pyslurm-host-lane: building pyslurm from $src against the host's libslurm (several minutes; log: $log)"
    t0=$(date +%s)
    if ! SLURM_LIB_DIR="/usr/lib/$(gcc -print-multiarch)" SLURM_INCLUDE_DIR=/usr/include \
            "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps --force-reinstall "$src" \
            >"$log" 2>&1; then
        grep -E "Error|error:|^ *[a-z_/]+\.pyx:[0-9]+" "$log" | grep -v "^WARNING: Location" | tail -n 15 >&2
        die "building pyslurm failed after $(( $(date +%s) - t0 ))s (log: $log)"
    fi
    echo "pyslurm-host-lane: pyslurm built and installed in $(( $(date +%s) - t0 ))s"
    echo "$want" >"$venv/.pyslurm-stamp"
fi

opts=(); paths=()
for a in "$@"; do if [ -e "$repo/${a%%::*}" ]; then paths+=("$a"); else opts+=("$a"); fi; done
[ "${#paths[@]}" -gt 0 ] || paths=(tests/slurm tests/daemon)
cd "$repo"
rc=0
for dir in tests/slurm tests/daemon; do
    group=()
    for p in "${paths[@]}"; do case "$p" in "$dir" | "$dir"/*) group+=("$p") ;; esac; done
    [ "${#group[@]}" -gt 0 ] || continue
    echo "== pyslurm backend: ${group[*]}"
    set +e
    TESSERAE_TEST_SLURM_BACKEND=pyslurm TESSERAE_TEST_PAYLOAD=plain \
        "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "slurm_live and every_release" "${opts[@]}" "${group[@]}"
    r=$?
    set -e
    [ "$r" -ne 5 ] || { echo "pyslurm-host-lane: no tests collected in ${group[*]}" >&2; r=1; }
    [ "$rc" -ne 0 ] || rc=$r
done
exit "$rc"
