#!/usr/bin/env bash
# The whole test suite: installs what it needs (GoogleTest from Debian, the
# Python test dependencies, the package itself), then runs the engine's
# GoogleTest suite through `meson test` and the pytest suite against the
# installed wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f /usr/include/gtest/gtest.h ]; then
  echo "== installing GoogleTest (libgtest-dev)"
  (apt-get update -qq && apt-get install -y -qq libgtest-dev) >/dev/null
fi

echo "== installing Python test dependencies"
python -m pip install -q --disable-pip-version-check \
  "meson-python>=0.15" "meson>=1.1" ninja "numpy>=2.1" pytest hypothesis "mypy>=2.4" torch==2.13.0 jax tensorstore zarr "moto[server]" apache-tvm-ffi safetensors

echo "== building and installing strideweave"
# -Dtesting=enabled: the test build adds the test-only extension
# strideweave._testing (fake Metal runtime) that the wheel users install leaves out.
python -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps \
  -Csetup-args=-Dtesting=enabled .

echo "== GoogleTest (meson test)"
if [ -d build-test ]; then
  meson setup build-test --reconfigure -Dgtest=enabled >/dev/null
else
  meson setup build-test -Dgtest=enabled >/dev/null
fi
ninja -C build-test >/dev/null
meson test -C build-test --print-errorlogs

echo "== demo and pytest (installed wheel)"
# Run from a scratch directory with -P so neither pytest nor the subprocesses
# that tests start put the source tree's strideweave/ (which has no compiled
# _core) ahead of the installed package.
repo=$(pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && python -P -m strideweave >/dev/null) || { echo "the demo (python -m strideweave) failed"; exit 1; }
echo "== stubtest (installed wheel against strideweave/_core.pyi and the submodules)"
(cd "$scratch" && python -P -m mypy.stubtest strideweave \
  --mypy-config-file "$repo/tools/stubtest/mypy.ini" --allowlist "$repo/tools/stubtest/allowlist.txt")
(cd "$scratch" && python -P -m pytest "$repo/tests" -q -p no:cacheprovider "$@")
