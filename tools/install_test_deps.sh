#!/usr/bin/env bash
# Installs, into the Python on PATH (a fresh venv of a wheel under test), what
# the test suite needs, plus the optional consumers that have a wheel for this
# Python here; a consumer without one is left out and its tests skip with
# the reason. Used by tools/build_wheels.sh and by cibuildwheel (before-test).
#
#   STRIDEWEAVE_TEST_TORCH=1   also torch==2.13.0 (the torch wheels of the
#                              public index are multi-GB CUDA builds, so only
#                              where a CPU wheel is at hand: CPython 3.11 here)
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
python -m pip install -q --only-binary=:all: pytest hypothesis "numpy>=2.1" >"$log" 2>&1 || { cat "$log"; exit 1; }
optional=(jax tensorstore apache-tvm-ffi zarr "moto[server]" mypy safetensors)
[ "${STRIDEWEAVE_TEST_TORCH:-0}" = 1 ] && optional=(torch==2.13.0 "${optional[@]}")
absent=()
for pkg in "${optional[@]}"; do
  # --only-binary: never build a consumer from source.
  python -m pip install -q --only-binary=:all: "$pkg" >/dev/null 2>&1 || absent+=("$pkg")
done
if [ ${#absent[@]} -gt 0 ]; then
  echo "optional test consumers not installed (no wheel for this Python here): ${absent[*]}"
fi
exit 0
