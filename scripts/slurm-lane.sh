#!/usr/bin/env bash
# Slurm releases other than the host's, without a container runtime: a cached Debian root per release
# (debootstrap), entered with chroot. Used by `./dev test` and `./dev devcluster --slurm VERSION`.
#
#   scripts/slurm-lane.sh VERSION root                  build or check the root and its venv, print its path
#   scripts/slurm-lane.sh VERSION test [--backend cli|pyslurm] [PYTEST ARGS]
#                                                       the Slurm-facing tests (-m slurm_live) inside it
#                                                       (default paths: tests/slurm tests/daemon)
#   scripts/slurm-lane.sh VERSION devcluster up|down|status [ARGS]   `tesserae devcluster` inside it
#   scripts/slurm-lane.sh VERSION shell [CMD ...]       a shell (or CMD) inside it, SLURM_CONF set when up
#
# VERSION: 24.11 (Debian trixie) or 26.05 (Debian sid). Roots live in
# ${TESSERAE_ROOTS_DIR:-/var/cache/tesserae-slurm/roots}/<suite>; a build goes to <suite>.tmp and is
# renamed when complete, so a killed build is never taken for a cache. The project's venv lives in the
# root (/opt/tesserae-venv: the `daemon` extra and the `test` one less cvxpy/ECOS, editable from this checkout, bind-mounted at the
# same path) and is reinstalled when pyproject.toml or the checkout's path changes.
#
# Mounts and processes: /proc, /dev, /sys and the checkout are mounted only when not mounted already.
# `test` and `shell` undo what they mounted and stop every process whose /proc/PID/root lies in the
# root when they end (also on failure or Ctrl-C). `test` refuses to start while something already runs
# in the root (a dev cluster that is up, a shell). `devcluster up` leaves its mounts and daemons;
# `devcluster down` stops them and unmounts everything under the root. Needs root (mount, chroot).
#
# `--backend pyslurm`: the same tests through the pyslurm backend (TESSERAE_TEST_SLURM_BACKEND=pyslurm).
# pyslurm is built in the root from the source tree or sdist TESSERAE_PYSLURM_SRC points at (PyPI has
# no sdist for these releases: docs/slurm-versions.md), against the root's libslurm-dev (installed with
# a compiler on first use), and rebuilt when that source changes. pyslurm binds one slurm.conf per
# process, so tests/slurm and tests/daemon (each with its own cluster) run as two pytest processes.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TESSERAE_ROOTS_DIR:-/var/cache/tesserae-slurm/roots}
venv_in_root=/opt/tesserae-venv
include=slurmctld,slurmd,slurm-client,munge,python3,python3-venv,git,ca-certificates

die() { echo "slurm-lane: $*" >&2; exit 1; }

[ $# -ge 2 ] || { sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version=$1; action=$2; shift 2
case "$version" in
    24.11) suite=trixie ;;
    26.05) suite=sid ;;
    *) die "unknown Slurm version '$version' (this script serves 24.11 and 26.05; 22.05 is the host's)" ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount, chroot)"
root=$cache/$suite

# ---- the root --------------------------------------------------------------------------------------
mirror() {  # the Debian mirror of the host's apt sources
    local uri
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | grep -v security | head -n1 || true)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
                          /etc/apt/sources.list 2>/dev/null || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

mounts_under() {  # mount points at or below $1, deepest first
    awk -v r="$1" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}

root_problem() {  # empty when the root looks usable; else what is wrong
    local b
    for b in usr/sbin/slurmctld usr/sbin/slurmd usr/sbin/munged usr/bin/squeue usr/bin/sbatch usr/bin/python3; do
        [ -x "$root/$b" ] || { echo "missing /$b"; return; }
    done
    chroot "$root" /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null </dev/null || { echo "python3-venv broken"; return; }
    local v
    v=$(chroot "$root" /usr/sbin/slurmd -V 2>/dev/null </dev/null) || { echo "slurmd -V fails"; return; }
    case "$v" in
        "slurm $version".* | "slurm-wlm $version".*) ;;
        *) echo "holds '$v', not Slurm $version (Debian $suite moved on? rebuild or adjust the lane)"; return ;;
    esac
}

build_root() {
    command -v debootstrap >/dev/null || {
        echo "slurm-lane: installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    local tmp=$root.tmp m
    [ -z "$(mounts_under "$tmp")" ] || die "$tmp has mounts under it; unmount them first"
    rm -rf "$tmp"
    m=$(mirror)
    echo "slurm-lane: building the Debian $suite root for Slurm $version from $m (about 1-2 min)"
    debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$m" >"$cache/$suite.build.log" 2>&1 \
        || die "debootstrap failed; see $cache/$suite.build.log"
    mv "$tmp" "$root"
}

ensure_root() {
    mkdir -p "$cache"
    local problem=""
    if [ -d "$root" ]; then
        problem=$(root_problem)
        if [ -n "$problem" ]; then
            [ -z "$(mounts_under "$root")" ] || die "the $suite root is broken ($problem) but has mounts: $0 $version devcluster down"
            echo "slurm-lane: the cached $suite root is broken ($problem): rebuilding"
            rm -rf "$root"
        fi
    fi
    [ -d "$root" ] || build_root
    problem=$(root_problem)
    [ -z "$problem" ] || die "the fresh $suite root is unusable: $problem"
    # what pip needs there: the host's CA bundle, pip settings and resolver
    mkdir -p "$root/etc/ssl/certs" "$root/etc/xdg"
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/" 2>/dev/null || true
    [ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$root/etc/pip.conf"
    [ ! -d /etc/xdg/pip ] || { rm -rf "$root/etc/xdg/pip"; cp -r /etc/xdg/pip "$root/etc/xdg/pip"; }
    [ ! -f /etc/resolv.conf ] || cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

# ---- mounts, processes, cleanup --------------------------------------------------------------------
mounted=()     # what this invocation mounted, in order
own_root=0     # 1: this invocation owns the root: at exit stop everything in it and unmount all under it
keep=0         # 1: leave mounts and processes (devcluster up succeeded)

mount_root() {
    mkdir -p "$root/proc" "$root/dev" "$root/sys" "$root$repo"
    if ! mountpoint -q "$root/proc"; then mount -t proc proc "$root/proc"; mounted+=("$root/proc"); fi
    local d
    for d in dev sys; do
        if ! mountpoint -q "$root/$d"; then
            mount --rbind "/$d" "$root/$d"
            mounted+=("$root/$d")
            mount --make-rslave "$root/$d"  # an unmount in here never propagates to the host's /dev, /sys
        fi
    done
    if ! mountpoint -q "$root$repo"; then mount --bind "$repo" "$root$repo"; mounted+=("$root$repo"); fi
}

pids_in_root() {
    local d r
    for d in /proc/[0-9]*; do
        r=$(readlink "$d/root" 2>/dev/null) || continue
        case "$r" in "$root" | "$root"/*) echo "${d#/proc/}" ;; esac
    done
}

stop_processes() {
    local pids i
    pids=$(pids_in_root | tr '\n' ' ')
    [ -n "${pids// /}" ] || return 0
    echo "slurm-lane: stopping processes left in the $suite root: $pids" >&2
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 1 50); do
        pids=$(pids_in_root | tr '\n' ' ')
        [ -n "${pids// /}" ] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.3
}

unmount() {  # $1: mount point; recursive, lazy as the last resort
    umount -R "$1" 2>/dev/null || umount -R -l "$1" 2>/dev/null || echo "slurm-lane: could not unmount $1" >&2
}

cleanup() {
    local rc=$? i m
    trap - EXIT INT TERM
    if [ "$keep" -eq 0 ]; then
        if [ "$own_root" -eq 1 ] || [ "${#mounted[@]}" -gt 0 ]; then stop_processes; fi
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do unmount "${mounted[i]}"; done
        if [ "$own_root" -eq 1 ]; then
            for m in $(mounts_under "$root"); do unmount "$m"; done
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

lock() {  # one user of a root at a time on this machine
    mkdir -p "$cache"
    exec 9>"$cache/$suite.lock"
    flock -n 9 || { echo "slurm-lane: waiting for another user of the $suite root" >&2; flock 9; }
}

# ---- inside the root -------------------------------------------------------------------------------
inside_env() {  # a clean environment for the root, with the host's pip and proxy settings
    local v
    echo "PATH=$venv_in_root/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "HOME=/root"
    echo "LANG=C.UTF-8"
    echo "TESSERAE_TEST_PAYLOAD=plain"
    for v in $(compgen -e); do
        case "$v" in PIP_* | http_proxy | https_proxy | no_proxy | HTTP_PROXY | HTTPS_PROXY | NO_PROXY | CI | TERM | TESSERAE_DEVCLUSTER_*)
            echo "$v=${!v}" ;;
        esac
    done
}

in_root() {  # run argv in the root, in the checkout
    local -a e
    mapfile -t e < <(inside_env)
    chroot "$root" /usr/bin/env -i "${e[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$repo" "$@"
}

ensure_venv() {
    local want have=""
    want="$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1) $repo"
    [ ! -f "$root$venv_in_root/.tesserae-stamp" ] || have=$(cat "$root$venv_in_root/.tesserae-stamp")
    [ "$want" != "$have" ] || return 0
    echo "slurm-lane: installing the project into $venv_in_root in the $suite root"
    [ -x "$root$venv_in_root/bin/python" ] || in_root /usr/bin/python3 -m venv "$venv_in_root" </dev/null
    # The `test` extra less what the `bench` extra also lists (cvxpy, ECOS: no wheels for Python 3.13/3.14
    # and no compiler in the root; only the solver comparison tests, never run here, need them).
    local log=$root$venv_in_root/pip.log reqs
    mapfile -t reqs < <(in_root /usr/bin/python3 -c 'import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(r for r in extras["test"] if r not in extras["bench"]))' </dev/null)
    [ "${#reqs[@]}" -gt 0 ] || die "no test requirements read from pyproject.toml"
    if ! in_root "$venv_in_root/bin/python" -m pip install -q --disable-pip-version-check -e ".[daemon]" "${reqs[@]}" \
            </dev/null >"$log" 2>&1; then
        grep -v "^WARNING: Location" "$log" | tail -n 20 >&2
        die "pip install in the $suite root failed (log: $log)"
    fi
    echo "$want" >"$root$venv_in_root/.tesserae-stamp"
}

pyslurm_in_root=/opt/pyslurm-src

source_digest() {  # $1: a directory or a file; the digest of its content (a directory without .git)
    if [ -d "$1" ]; then
        tar -C "$1" --exclude=.git --exclude='*.so' --exclude='*.c' --exclude=build --sort=name --mtime=@0 \
            --owner=0 --group=0 --numeric-owner -cf - . | sha256sum | cut -d' ' -f1
    else
        sha256sum "$1" | cut -d' ' -f1
    fi
}

ensure_pyslurm() {  # pyslurm from TESSERAE_PYSLURM_SRC, built against the root's libslurm
    local src=${TESSERAE_PYSLURM_SRC:-} want have="" stamp=$root$venv_in_root/.pyslurm-stamp log multiarch t0
    [ -n "$src" ] || die "--backend pyslurm needs TESSERAE_PYSLURM_SRC: pyslurm's $version source (a checkout of \
PySlurm/pyslurm's ${version/.0/.}.x branch, or its sdist). PyPI has none for Slurm $version (docs/slurm-versions.md)"
    [ -e "$src" ] || die "TESSERAE_PYSLURM_SRC=$src does not exist"
    src=$(realpath "$src")
    want=$(source_digest "$src")
    [ ! -f "$stamp" ] || have=$(cat "$stamp")
    if [ "$want" = "$have" ] && in_root "$venv_in_root/bin/python" -m pip show -q pyslurm </dev/null >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(in_root /usr/bin/dpkg-query -W -f='${Status}\n' libslurm-dev gcc libc6-dev python3-dev </dev/null 2>/dev/null \
            | grep -c '^install ok installed$')" -ne 4 ]; then
        echo "slurm-lane: installing libslurm-dev and a compiler into the $suite root"
        in_root /usr/bin/env DEBIAN_FRONTEND=noninteractive /bin/sh -c \
            'apt-get update -qq && apt-get install -y -qq --no-install-recommends libslurm-dev gcc libc6-dev python3-dev' \
            </dev/null >"$root/var/log/tesserae-pyslurm-apt.log" 2>&1 \
            || { tail -n 20 "$root/var/log/tesserae-pyslurm-apt.log" >&2; die "apt-get in the $suite root failed"; }
    fi
    rm -rf "$root$pyslurm_in_root"
    mkdir -p "$root$pyslurm_in_root"
    if [ -d "$src" ]; then
        tar -C "$src" --exclude=.git -cf - . | tar -C "$root$pyslurm_in_root" -xf -
    else
        tar -C "$root$pyslurm_in_root" --strip-components=1 -xf "$src"
    fi
    multiarch=$(in_root /usr/bin/gcc -print-multiarch </dev/null)
    log=$root$venv_in_root/pyslurm-build.log
    echo "slurm-lane: building pyslurm from $src against the $suite root's libslurm (several minutes; log: $log)"
    t0=$(date +%s)
    if ! in_root /usr/bin/env SLURM_LIB_DIR="/usr/lib/$multiarch" SLURM_INCLUDE_DIR=/usr/include \
            "$venv_in_root/bin/python" -m pip install --disable-pip-version-check --no-deps --force-reinstall \
            "$pyslurm_in_root" </dev/null >"$log" 2>&1; then
        grep -E "Error|error:|^ *[a-z_/]+\.pyx:[0-9]+" "$log" | grep -v "^WARNING: Location" | tail -n 15 >&2
        die "building pyslurm in the $suite root failed after $(( $(date +%s) - t0 ))s (log: $log)"
    fi
    echo "slurm-lane: pyslurm built and installed in $(( $(date +%s) - t0 ))s"
    echo "$want" >"$stamp"
}

run_pytest() {  # the live tests, in the background + wait: a TERM or INT to this script runs the cleanup
    # at once (bash defers traps until a foreground child ends), and the cleanup stops pytest with the rest.
    # every_release: the live tests whose outcome depends on the Slurm release (pyproject.toml); the
    # rest (operator actions, web page, retention, logs, ...) runs on the host's 22.05 only.
    in_root /usr/bin/env TESSERAE_TEST_SLURM_BACKEND="$backend" \
        "$venv_in_root/bin/python" -m pytest -q -p no:cacheprovider -m "slurm_live and every_release" "$@" </dev/null &
    wait "$!"
}

cluster_conf=/root/.cache/tesserae/devcluster/etc/slurm.conf  # `tesserae devcluster`'s default inside

case "$action" in
    root)
        lock
        ensure_root
        own_root=1
        mount_root
        ensure_venv
        echo "$root"
        ;;
    test)
        backend=cli
        case "${1:-}" in
            --backend) backend=${2:?"--backend needs cli or pyslurm"}; shift 2 ;;
            --backend=*) backend=${1#--backend=}; shift ;;
        esac
        case "$backend" in cli | pyslurm) ;; *) die "unknown backend '$backend' (cli or pyslurm)" ;; esac
        lock
        ensure_root
        busy=$(pids_in_root | tr '\n' ' ')
        [ -z "${busy// /}" ] || die "processes run in the $suite root ($busy): a dev cluster or shell? \`./dev devcluster --slurm $version down\` first"
        own_root=1
        mount_root
        ensure_venv
        [ "$backend" = cli ] || ensure_pyslurm
        set +e
        # Live tests live in these two directories (tests/conftest.py refuses one elsewhere): the other
        # test modules import torch, numba or cvxpy, which the root does not have.
        # Only options given (e.g. --durations=0): the default paths still apply.
        opts=(); paths=()
        for a in "$@"; do if [ -e "$repo/${a%%::*}" ]; then paths+=("$a"); else opts+=("$a"); fi; done
        [ "${#paths[@]}" -gt 0 ] || paths=(tests/slurm tests/daemon)
        if [ "$backend" = cli ]; then
            run_pytest "${opts[@]}" "${paths[@]}"
            rc=$?
        else  # one pytest per test directory: each has its own cluster, and pyslurm serves one per process
            rc=0
            for dir in tests/slurm tests/daemon; do
                group=()
                for p in "${paths[@]}"; do case "$p" in "$dir" | "$dir"/*) group+=("$p") ;; esac; done
                [ "${#group[@]}" -gt 0 ] || continue
                echo "== pyslurm backend: ${group[*]}"
                run_pytest "${opts[@]}" "${group[@]}"
                r=$?
                [ "$r" -ne 5 ] || { echo "slurm-lane: no tests collected in ${group[*]}" >&2; r=1; }
                [ "$rc" -ne 0 ] || rc=$r
            done
        fi
        set -e
        [ "$rc" -ne 5 ] || { echo "slurm-lane: no tests collected in the $version lane" >&2; rc=1; }
        exit "$rc"
        ;;
    devcluster)
        [ $# -ge 1 ] || die "devcluster needs up, down or status"
        lock
        ensure_root
        case "$1" in
            up)
                mount_root
                ensure_venv
                in_root "$venv_in_root/bin/tesserae" devcluster "$@" --no-install </dev/null
                keep=1
                echo "# enter it with: ./dev devcluster --slurm $version shell   (SLURM_CONF is set there)"
                ;;
            down)
                if [ -n "$(mounts_under "$root/proc")" ] && [ -x "$root$venv_in_root/bin/tesserae" ]; then
                    in_root "$venv_in_root/bin/tesserae" devcluster "$@" </dev/null || true
                fi
                own_root=1
                ;;
            status)
                [ -n "$(mounts_under "$root/proc")" ] || { echo "dev cluster (Slurm $version): not up"; exit 3; }
                keep=1
                in_root "$venv_in_root/bin/tesserae" devcluster "$@" </dev/null
                ;;
            *) die "devcluster: unknown action '$1' (up, down, status)" ;;
        esac
        ;;
    shell)
        ensure_root
        if mountpoint -q "$root/proc"; then keep=1; fi  # a dev cluster is up: leave it and its mounts
        mount_root
        ensure_venv
        set +e
        if [ $# -eq 0 ]; then set -- /bin/bash; fi
        if [ -f "$root$cluster_conf" ]; then
            in_root /usr/bin/env SLURM_CONF="$cluster_conf" PS1="(slurm $version) \\w# " "$@"
        else
            in_root /usr/bin/env PS1="(slurm $version) \\w# " "$@"
        fi
        rc=$?
        set -e
        exit "$rc"
        ;;
    *)
        die "unknown action '$action' (root, test, devcluster, shell)"
        ;;
esac
