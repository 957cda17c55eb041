#!/usr/bin/env bash
# The test command for an installed wheel (tools/build_wheels.sh and
# cibuildwheel's test-command): from a scratch directory outside the source
# tree (with -P where Python has it, 3.11+, so that nothing puts a source
# strideweave/ without a compiled core ahead of the installed package), run
# the demo and the pytest suite of SRC (a clone or an unpacked sdist) against
# the installed wheel.
#
#   bash tools/test_installed.sh SRC [pytest args...]
set -euo pipefail
src=$(cd "$1" && pwd)
shift
unset STRIDEWEAVE_BUILD PYTHONPATH
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
safe_path=$(python -c 'import sys; print("-P" if sys.version_info >= (3, 11) else "")')
python $safe_path -m strideweave --version
python $safe_path -m strideweave >demo.out 2>&1 || { cat demo.out; echo "the demo (python -m strideweave) failed"; exit 1; }
python $safe_path -m pytest "$src/tests" -q -p no:cacheprovider "$@"
