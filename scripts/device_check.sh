#!/usr/bin/env bash
# The CUDA backend's proof on a GPU, in one command of at most 8 minutes that needs no
# network: correctness of every sample and JAX benchmark module (cuda == interpreter),
# compute-sanitizer memcheck on the samples, bandwidth of our fused kernels vs a
# device-to-device copy, whole-module time vs XLA:GPU (JAX) and a bf16 gemm (NVRTC kernel
# vs cuBLASLt).  Figures go to device_check.txt ($OUT/device_check.txt when $OUT is set).
# Without a GPU the same script checks what it can under cuda-sim.
#
#   scripts/device_check.sh [--out FILE] [--backend cuda|cuda-sim] [--quick]
#
# Python packages the machine lacks (nvmath-python, lark ...) travel as wheels in .whl/
# (or ../.whl/): they are installed into a private folder, never from the network.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
for d in .whl ../.whl; do
  if ls "$d"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/hlo-opt-device-site "$d"/*.whl \
      && export PYTHONPATH=/tmp/hlo-opt-device-site${PYTHONPATH:+:$PYTHONPATH}
    break
  fi
done
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export HLO_OPT_CACHE_DIR=${HLO_OPT_CACHE_DIR:-/tmp/hlo-opt-cache}
default_out=device_check.txt
[ -n "${OUT:-}" ] && default_out="$OUT/device_check.txt"
case " $* " in *" --out "*) extra=() ;; *) extra=(--out "$default_out") ;; esac
exec timeout "${DEVICE_CHECK_TIMEOUT:-470}" "$PY" scripts/device_check.py "${extra[@]}" "$@"
