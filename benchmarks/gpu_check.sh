#!/usr/bin/env bash
# GPU readiness check: on a machine with one NVIDIA GPU and a fresh clone, set
# up and, within about 8 minutes, run what torchport claims for CUDA:
#   1. torchport backends                         (what is found, and why not)
#   2. evaluate builtin:classifier and builtin:gpt on cpu, cuda, cuda-compile
#      (--repeats 2; the trace stage on, the checks run separately in 3)
#   3. check parity,checkpoint on cuda
#   4. benchmarks/bench_loop.py on cuda (torchport's worker against a
#      hand-written loop, paired rounds)
# Everything lands in one folder (default gpu-check-results/): each step's
# output, its exit status and duration in steps.tsv, the machine in machine.txt.
# A failing step is recorded and the next one still runs (a failure on a
# backend is a result); the exit status is 1 when any step failed.
#
#   bash benchmarks/gpu_check.sh [RESULTS_DIR]
#
# Setup.  If python3 (or $GPU_CHECK_PYTHON) already has a torch that sees a
# GPU, torchport is installed into it (pip install -e .): GPU machines usually
# come with their own CUDA build of torch, and a second one would be a 3 GB
# download.  Otherwise a venv (.venv-gpu) gets torch from PyPI, whose Linux
# x86-64 wheels are CUDA builds.  pip's own settings apply, so a machine
# without the internet works with PIP_NO_INDEX=1 PIP_FIND_LINKS=<wheel folder>.
# GPU_CHECK_BACKENDS / GPU_CHECK_CHECK_BACKEND / GPU_CHECK_ROUNDS change what
# runs (used to try the script on a CPU-only machine).
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${1:-gpu-check-results}
BACKENDS=${GPU_CHECK_BACKENDS:-cpu,cuda,cuda-compile}
CHECK_BACKEND=${GPU_CHECK_CHECK_BACKEND:-cuda}
BENCH_BACKENDS=${GPU_CHECK_BENCH_BACKENDS:-cuda}
ROUNDS=${GPU_CHECK_ROUNDS:-3}
mkdir -p "$RESULTS"
STEPS_FILE=$RESULTS/steps.tsv
printf 'step\texit\tseconds\n' >"$STEPS_FILE"
failed=0
started=$(date +%s)

record() {  # NAME EXIT SECONDS
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$STEPS_FILE"
    [ "$2" = 0 ] || { failed=1; echo "== $1: exit $2"; }
}

# run_step NAME TIMEOUT_SECONDS COMMAND...: output to RESULTS/NAME.log (and the
# terminal), exit status and wall time to steps.tsv; never stops the script.
run_step() {
    local name=$1 limit=$2
    shift 2
    local t0 rc
    t0=$(date +%s)
    echo "== $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$RESULTS/$name.log"
    rc=${PIPESTATUS[0]}
    record "$name" "$rc" "$(( $(date +%s) - t0 ))"
}

choose_python() {
    local candidate=${GPU_CHECK_PYTHON:-python3}
    if "$candidate" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
        || [ -n "${GPU_CHECK_PYTHON:-}" ]; then
        PY=$(command -v "$candidate")
        return
    fi
    local venv=.venv-gpu
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet torch
    PY=$venv/bin/python
}

setup() {
    choose_python
    # Install unless this very checkout is already what `import torchport` finds.
    if ! "$PY" -c 'import os, sys, torchport; sys.exit(0 if os.path.samefile(os.path.dirname(torchport.__file__), "src/torchport") else 1)' 2>/dev/null; then
        "$PY" -m pip install --quiet -e . || return 1
    fi
    echo "python: $PY"
}

{
    date -u +'%Y-%m-%dT%H:%M:%SZ'
    git rev-parse HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi: not found"
    nproc
} >"$RESULTS/machine.txt"

echo "== setup"
t0=$(date +%s)
setup >"$RESULTS/setup.log" 2>&1
record setup $? "$(( $(date +%s) - t0 ))"
cat "$RESULTS/setup.log"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))' \
    >>"$RESULTS/machine.txt" 2>&1
TP=("$PY" -m torchport)

run_step backends 60 "${TP[@]}" backends
for app in classifier gpt; do
    run_step "evaluate-$app" 200 "${TP[@]}" evaluate "builtin:$app" -b "$BACKENDS" --repeats 2 \
        --no-checks -o "$RESULTS/evaluate-$app"
done
run_step "check-$CHECK_BACKEND" 100 "${TP[@]}" check builtin:classifier -b "$CHECK_BACKEND" \
    --only parity,checkpoint --json "$RESULTS/check-$CHECK_BACKEND.json"
run_step bench-loop 150 "$PY" benchmarks/bench_loop.py --apps classifier,gpt \
    --backends "$BENCH_BACKENDS" --rounds "$ROUNDS" --json "$RESULTS/bench-loop.json"

echo "== total $(( $(date +%s) - started ))s; steps:"
column -t "$STEPS_FILE" 2>/dev/null || cat "$STEPS_FILE"
exit "$failed"
