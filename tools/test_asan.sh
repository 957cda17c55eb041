#!/usr/bin/env bash
# The pytest suite (and the GoogleTest engine suite) against an
# AddressSanitizer + UndefinedBehaviorSanitizer build of the extension.
#
#   bash tools/test_asan.sh [pytest args...]      default: tests; e.g. tests/move/test_move.py -x
#
# Builds build-asan with meson's built-in option
#   meson setup build-asan -Db_sanitize=address,undefined -Dbuildtype=debugoptimized
# then runs pytest with the sanitizer runtimes preloaded into the (unsanitized)
# python interpreter:
#   LD_PRELOAD      libasan + libubsan: the runtime must be loaded before
#                   anything else, since python itself is not instrumented
#   PYTHONMALLOC    malloc: route CPython's allocator through ASan's malloc so
#                   heap errors in objects are caught, not hidden by pymalloc
#   ASAN_OPTIONS    detect_leaks=0: CPython deliberately leaks at exit;
#                   halt_on_error=1 + abort_on_error: a finding stops the run
#   UBSAN_OPTIONS   print_stacktrace=1:halt_on_error=1
# Sanitizer reports go to stderr (and, with log_path, to build-asan/logs/).
# Exit status: pytest's, or non-zero when a sanitizer aborted the run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${ASAN_BUILD_DIR:-build-asan}

if [ -d "$BUILD" ]; then
  meson setup "$BUILD" --reconfigure -Db_sanitize=address,undefined -Dbuildtype=debugoptimized >/dev/null
else
  meson setup "$BUILD" -Db_sanitize=address,undefined -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C "$BUILD" -j"${JOBS:-2}"

CC_BIN=${CC:-gcc}
libasan=$($CC_BIN -print-file-name=libasan.so)
libubsan=$($CC_BIN -print-file-name=libubsan.so)
libstdcxx=$($CC_BIN -print-file-name=libstdc++.so)
mkdir -p "$BUILD/logs"
rm -f "$BUILD"/logs/asan.* "$BUILD"/logs/ubsan.* "$BUILD"/logs/pytest.out "$BUILD"/logs/gtest.out

export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=0:allocator_may_return_null=1:log_path=$PWD/$BUILD/logs/asan:${ASAN_EXTRA_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0:log_path=$PWD/$BUILD/logs/ubsan"

if [ -z "${SKIP_GTEST:-}" ] && [ -x "$BUILD/tests/cpp/engine_tests" ]; then
  echo "== GoogleTest under ASan/UBSan"
  # Its output is searched with pytest's below: UBSan writes to stderr here too.
  set +e
  "$BUILD/tests/cpp/engine_tests" --gtest_brief=1 2>&1 | tee "$BUILD/logs/gtest.out"
  gtest_status=${PIPESTATUS[0]}
  set -e
  [ $gtest_status -eq 0 ] || { echo "== GoogleTest failed under ASan/UBSan"; exit $gtest_status; }
fi

echo "== pytest under ASan/UBSan ($BUILD)"
[ $# -eq 0 ] && set -- tests
# libstdc++ is preloaded too so that ASan's operator new/delete interceptors
# and the extension agree on one C++ runtime when torch/jax load their own.
# STRIDEWEAVE_SANITIZED tells tests that measure RSS (tests/move/test_memory_bounds.py) to
# skip: ASan's quarantine and shadow memory make resident-set bounds moot.
# UBSan reports from the preloaded runtime can reach stderr instead of
# log_path (seen with this ASan+UBSan pairing), so the run's output is kept
# and searched too; --capture=sys leaves file descriptor 2 alone, so pytest
# does not swallow a report written during a passing test.
set +e
LD_PRELOAD="$libasan $libubsan $libstdcxx" PYTHONMALLOC=malloc STRIDEWEAVE_BUILD="$BUILD" STRIDEWEAVE_SANITIZED=1 \
  python -m pytest -q -p no:cacheprovider --capture=sys "$@" 2>&1 | tee "$BUILD/logs/pytest.out"
status=${PIPESTATUS[0]}
set -e
outputs=("$BUILD/logs/pytest.out")
[ -f "$BUILD/logs/gtest.out" ] && outputs+=("$BUILD/logs/gtest.out")
if grep -qE "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "${outputs[@]}"; then
  echo "== sanitizer reports in the GoogleTest or pytest output"
  grep -nE "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "${outputs[@]}" | head -20
  [ $status -eq 0 ] && status=1
elif ls "$BUILD"/logs/asan.* "$BUILD"/logs/ubsan.* >/dev/null 2>&1; then
  echo "== sanitizer reports (full text in $BUILD/logs/)"
  for f in "$BUILD"/logs/asan.* "$BUILD"/logs/ubsan.*; do
    [ -f "$f" ] || continue
    echo "--- $f"
    head -40 "$f"
  done
  [ $status -eq 0 ] && status=1
else
  echo "== no sanitizer reports"
fi
exit $status
