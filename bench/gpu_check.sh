#!/usr/bin/env bash
# On a GPU machine: run `remedy doctor`, `remedy probe --json` and the deep diagnose
# (`remedy probe --deep --json`), each under `timeout`, and record what each printed, its exit
# code and how long it took.
#
#   bench/gpu_check.sh [DIR]     # default DIR: bench/results/gpu-<hostname>-<UTC date>/
#
# DIR gets one <step>.out per step (stdout and stderr), results.tsv (step, exit code, seconds,
# command) and environment.txt (host, kernel, driver, GPUs, remedy's commit). A step that fails
# or times out (exit 124, or 137 after the kill) is recorded like any other; the script goes on
# to the next and exits 0 once all are recorded. Ctrl-C or a TERM stops the step running (its
# whole process group) before the script exits.
#
# Environment: REMEDY (the command; default .venv/bin/remedy, else remedy on PATH),
# STEP_TIMEOUT_S (default 900 per step), PROBE_ARGS (extra probe options; default
# --expected-gpus N from nvidia-smi -L when it is there).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$root/bench/results/gpu-$(hostname)-$(date -u +%Y%m%d)"}
step_timeout=${STEP_TIMEOUT_S:-900}
if [ -n "${REMEDY:-}" ]; then
    remedy=$REMEDY
elif [ -x "$root/.venv/bin/remedy" ]; then
    remedy="$root/.venv/bin/remedy"
else
    remedy=remedy
fi
if [ -z "${PROBE_ARGS+x}" ]; then
    PROBE_ARGS=""
    if command -v nvidia-smi >/dev/null 2>&1; then
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
        [ "$gpus" -gt 0 ] && PROBE_ARGS="--expected-gpus $gpus"
    fi
fi

mkdir -p "$out"
results="$out/results.tsv"
printf 'step\texit\tseconds\tcommand\n' >"$results"

child=""
stop() {
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null  # timeout passes it on to the step's process group
        wait "$child" 2>/dev/null
        child=""
    fi
    echo "gpu_check: stopped; partial results in $out" >&2
    exit 130
}
trap stop INT TERM

now_ms() { date +%s%3N; }

# run STEP COMMAND...: the command's output to STEP.out, a line to results.tsv
run() {
    local step=$1 rc started ended
    shift
    echo "gpu_check: $step: $*" >&2
    started=$(now_ms)
    timeout --kill-after=10 "$step_timeout" "$@" >"$out/$step.out" 2>&1 </dev/null &
    child=$!
    wait "$child"
    rc=$?
    child=""
    ended=$(now_ms)
    printf '%s\t%s\t%s\t%s\n' "$step" "$rc" \
        "$(awk -v ms=$((ended - started)) 'BEGIN { printf "%.3f", ms / 1000 }')" "$*" >>"$results"
    echo "gpu_check: $step: exit $rc in $((ended - started)) ms" >&2
}

{
    echo "host: $(hostname)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -srm)"
    echo "remedy: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown) ($remedy)"
    echo "probe args: ${PROBE_ARGS:-none}"
    echo "step timeout: ${step_timeout}s"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=index,name,driver_version,serial,pci.bus_id --format=csv 2>&1
    else
        echo "nvidia-smi: not installed"
    fi
} >"$out/environment.txt"

# shellcheck disable=SC2086 # PROBE_ARGS is a list of options
run doctor "$remedy" doctor
# shellcheck disable=SC2086
run probe "$remedy" probe --json $PROBE_ARGS
# shellcheck disable=SC2086
run deep_diagnose "$remedy" probe --deep --json $PROBE_ARGS

trap - INT TERM
column -t -s "$(printf '\t')" "$results" 2>/dev/null || cat "$results"
echo "gpu_check: results in $out" >&2
