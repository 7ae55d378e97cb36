#!/usr/bin/env bash
# The real-GPU check: `pytest -m gpu` and envcheck's CLI on a machine with an NVIDIA GPU, in one
# short run (the GPU machine lent to a session has no network: what envcheck needs beyond that
# image's Python travels as wheels in .whl/, made here first):
#
#   mkdir -p .whl && pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 -d .whl platformdirs virtualenv \
#       distlib python-discovery uv jupyter_core traitlets && pip wheel --no-deps . -w .whl
#
# then, on the GPU machine, from the repository root: bash bench/device_check.sh
# (results under $OUT, else ./device-check/). Interpreter: python3 there, with torch and jax.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-device-check}; mkdir -p "$OUT"
PY=$(command -v python3)
{
echo "== host"; date -u; nvidia-smi -L
nvidia-smi --query-gpu=driver_version,name,memory.total,pci.bus_id,ecc.mode.current --format=csv
$PY --version; echo "python: $PY"
[ -d .whl ] && $PY -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -3
$PY -m pip show torch jax nvidia-ml-py pytest pytest-timeout 2>/dev/null | grep -E "^(Name|Version)"
} 2>&1 | tee "$OUT/host.txt"
export ENVCHECK_TEST_GPU_PYTHON=$PY  # tests/test_level3.py: level 3 in this interpreter's framework
echo "== pytest -m gpu"
timeout 330 $PY -m pytest -m gpu -v -p no:cacheprovider -rs tests/test_gpu_real.py tests/test_level3.py tests/test_preflight_gpu.py 2>&1 \
    | tee "$OUT/pytest_gpu.log" | tail -25
ENVCHECK_HOME=$(mktemp -d); export ENVCHECK_HOME  # a fresh node: no env
{
for args in "gpu" "gpu --level 1" "validate --level 1" "validate --level 1 --json" "metrics" "labels" "doctor"; do
    echo "== envcheck $args"; timeout 120 $PY -m envcheck $args; echo "rc=$?"
done
echo "== timings (ms, 7 rounds interleaved)"
$PY - <<'PYEOF'
import statistics, subprocess, sys, time
cmds = {"python -c pass": [sys.executable, "-c", "pass"],
        "envcheck gpu --json": [sys.executable, "-m", "envcheck", "gpu", "--json"],
        "envcheck gpu --level 1 --json": [sys.executable, "-m", "envcheck", "gpu", "--level", "1", "--json"],
        "envcheck metrics": [sys.executable, "-m", "envcheck", "metrics"]}
times = {k: [] for k in cmds}
for _ in range(7):
    for k, c in cmds.items():
        start = time.perf_counter()
        subprocess.run(c, capture_output=True)
        times[k].append((time.perf_counter() - start) * 1e3)
for k, v in times.items():
    print(f"{k}: median {statistics.median(v):.0f} ms (min {min(v):.0f}, max {max(v):.0f})")
PYEOF
} 2>&1 | tee "$OUT/cli.txt" | grep -v '^ \|^{\|^}\|^#'
