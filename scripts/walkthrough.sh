#!/usr/bin/env bash
# The daemon walkthrough in one command (`./dev walkthrough`), without the test suite or torch:
#   up      install the tools for every user (scripts/install-site.sh into DIR/site, not /opt), bring up
#           the dev cluster (4 nodes x 4 fake GPUs), start the daemon with the page and metrics on, submit
#           a few torch-free jobs as root and as `nobody`, and print where to look
#   status  the daemon and the cluster
#   down    stop the daemon and the cluster (DIR stays: its state database and logs; `down --purge` removes it)
# DIR: $TESSERAE_WALKTHROUGH_DIR or /tmp/tesserae-walkthrough. Ports: $TESSERAE_WALKTHROUGH_WEB (default
# 9479, the page and API) and $TESSERAE_WALKTHROUGH_METRICS (default 9478). Root only (the dev cluster, a
# second user through runuser).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${TESSERAE_WALKTHROUGH_DIR:-/tmp/tesserae-walkthrough}
web=${TESSERAE_WALKTHROUGH_WEB:-9479}
metrics=${TESSERAE_WALKTHROUGH_METRICS:-9478}
other=nobody
bin=$dir/bin
cfg=$dir/tesserae.yaml
pidfile=$dir/daemon.pid

say() { printf '%s\n' "$*"; }
die() { printf 'walkthrough: %s\n' "$*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "run it as root (it starts a dev cluster and submits as a second user)"
case "$dir" in /*) ;; *) die "TESSERAE_WALKTHROUGH_DIR must be an absolute path, got '$dir'" ;; esac

daemon_alive() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

down() {
    if daemon_alive; then
        local pid; pid=$(cat "$pidfile")
        kill -TERM "$pid"
        for _ in $(seq 1 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        say "daemon $pid stopped"
    fi
    rm -f "$pidfile"
    if [ -x "$bin/tesserae" ] && [ -d "$dir/cluster" ]; then
        "$bin/tesserae" devcluster down --dir "$dir/cluster"
    fi
}

case "${1:-up}" in
    down)
        down
        if [ "${2:-}" = "--purge" ]; then rm -rf "$dir"; say "removed $dir"; fi
        exit 0 ;;
    status)
        if daemon_alive; then say "daemon: running (pid $(cat "$pidfile")), page http://$(cat "$dir/web.address")/"
        else say "daemon: not running"; fi
        [ -x "$bin/tesserae" ] || { say "not installed in $dir"; exit 3; }
        exec "$bin/tesserae" devcluster status --dir "$dir/cluster" ;;
    up) ;;
    *) die "unknown command '$1' (up, status, down [--purge])" ;;
esac

daemon_alive && die "already up (daemon pid $(cat "$pidfile")): ./dev walkthrough down first"
for port in "$web" "$metrics"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is in use: set TESSERAE_WALKTHROUGH_WEB / TESSERAE_WALKTHROUGH_METRICS to free ports"
    fi
done
mkdir -p "$dir"
chmod 755 "$dir"
say "== installing the tools for every user into $dir/site (scripts/install-site.sh)"
bash "$here/scripts/install-site.sh" --prefix "$dir/site" --bin-dir "$bin" --no-profile
say "== the dev cluster: 4 nodes x 4 fake GPUs"
"$bin/tesserae" devcluster up --dir "$dir/cluster" >/dev/null
export SLURM_CONF=$dir/cluster/etc/slurm.conf TESSERAE_CONFIG=$cfg TESSERAE_PYTHON=$dir/site/bin/python
# what every user's jobs write (stop records, speed reports, output) and run (the torch-free tick job)
for d in out stops reports; do mkdir -p "$dir/$d"; chmod 1777 "$dir/$d"; done
mkdir -p "$dir/jobs" "$dir/state"
cp "$here/tests/daemon/jobs/tick.sbatch" "$here/tests/daemon/jobs/tick.py" "$dir/jobs/"
chmod -R a+rX "$dir/jobs"
chmod 750 "$dir/state"
"$dir/site/bin/python" - "$here/etc/tesserae-devcluster.yaml" "$cfg" "$dir" "$web" "$metrics" <<'EOF'
import sys, yaml
src, dst, d, web, metrics = sys.argv[1:]
cfg = yaml.safe_load(open(src))
cfg["state"]["database"] = f"{d}/state/state.db"
cfg["preemption"]["stop_records_dir"] = f"{d}/stops"
cfg["feedback"]["reports_dir"] = f"{d}/reports"
cfg["http"]["listen"] = f"127.0.0.1:{web}"
cfg["metrics"]["listen"] = f"127.0.0.1:{metrics}"
open(dst, "w").write(yaml.safe_dump(cfg, sort_keys=False))
EOF
chmod 644 "$cfg"
say "== the daemon (log: $dir/daemon.log)"
nohup "$bin/tesserae" daemon --config "$cfg" >"$dir/daemon.log" 2>&1 </dev/null &
echo $! >"$pidfile"
echo "127.0.0.1:$web" >"$dir/web.address"
# Up once the daemon itself says it serves both ports: a port that merely answers may be another
# program's, taken since the check above.
served() { grep -q "$1 on http://127.0.0.1:$2/" "$dir/daemon.log"; }
for _ in $(seq 1 60); do
    served "web page and API" "$web" && served metrics "$metrics" && break
    if grep -q "not started on" "$dir/daemon.log" || ! daemon_alive; then
        tail -5 "$dir/daemon.log" >&2; down >/dev/null 2>&1 || true
        die "the daemon did not serve ports $web and $metrics (see $dir/daemon.log)"
    fi
    sleep 1
done
served "web page and API" "$web" || die "the daemon's page did not come up in 60 s (see $dir/daemon.log)"
as_other() {
    runuser -u "$other" -- env -i HOME=/tmp PATH="$bin:/usr/bin:/bin" SLURM_CONF="$SLURM_CONF" \
        TESSERAE_CONFIG="$cfg" TESSERAE_PYTHON="$TESSERAE_PYTHON" "$@"
}
submit() {  # WHO GPUS MODEL BATCH NAME STEPS
    local who=$1 gpus=$2 model=$3 batch=$4 name=$5 steps=$6 shape
    if [ "$model" = - ]; then shape=(--no-profile); else shape=(--model "$model" --batch-size "$batch"); fi
    local argv=(tsbatch --parsable --gpus "$gpus" "${shape[@]}" -J "$name" -o "$dir/out/%j.out"
                "$dir/jobs/tick.sbatch" "$dir/out" "$steps" 0.1)
    local id
    if [ "$who" = root ]; then id=$(PATH="$bin:$PATH" "${argv[@]}"); else id=$(as_other "${argv[@]}"); fi
    [ "$model" = - ] && model="no profile"
    say "  job $id: $name, $gpus GPU(s) $model, by $who"
}
say "== jobs from root and $other (tick jobs: steps of 0.1 s; they checkpoint and resume when stopped)"
submit root 1 DCGAN 32 dcgan-a 1200
submit "$other" 1 DCGAN 32 dcgan-b 1200
submit root 2 resnet50 64 resnet-a 900
submit "$other" 2 resnet50 64 resnet-b 900
submit root 4 vgg19 32 vgg-a 600
submit "$other" 1 DCGAN 64 dcgan-c 1500
submit root 2 GPT2-Medium 512/8 gpt2-a 900
submit "$other" 1 resnet50 64 resnet-c 1200
submit root 8 - - big8 300
cat <<EOF

The daemon runs 5 s rounds; within a minute the jobs start, pairs share GPUs, and the 8-GPU job waits,
then preempts others once they are demoted. Where to look:

  page:     http://127.0.0.1:$web/          (the API: http://127.0.0.1:$web/api; tunnel: ssh -L $web:127.0.0.1:$web HOST)
  metrics:  curl -s 127.0.0.1:$metrics/metrics | grep ^tesserae_
  shell:    export PATH=$bin:\$PATH SLURM_CONF=$SLURM_CONF TESSERAE_CONFIG=$cfg
            tesserae jobs; tesserae rounds; tesserae explain JOB; squeue
  as $other: runuser -u $other -- env PATH=$bin:/usr/bin:/bin SLURM_CONF=$SLURM_CONF TESSERAE_CONFIG=$cfg tesserae jobs
            ($other cannot read the state database: jobs and explain answer through the API)
  log:      tail -f $dir/daemon.log
  stop:     ./dev walkthrough down   (--purge also removes $dir; keep TESSERAE_WALKTHROUGH_DIR as set for up)
EOF
