#!/usr/bin/env bash
# The test command for an installed wheel (tools/build_wheels.sh and
# cibuildwheel's test-command): from a scratch directory outside the source
# tree, with -P so that nothing puts the source's strideweave/ (which has no
# compiled core) ahead of the installed package, run the demo and the pytest
# suite of SRC (a clone or an unpacked sdist) against the installed wheel.
#
#   bash tools/test_installed.sh SRC [pytest args...]
set -euo pipefail
src=$(cd "$1" && pwd)
shift
unset STRIDEWEAVE_BUILD PYTHONPATH
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
python -P -m strideweave --version
python -P -m strideweave >demo.out 2>&1 || { cat demo.out; echo "the demo (python -m strideweave) failed"; exit 1; }
python -P -m pytest "$src/tests" -q -p no:cacheprovider "$@"
