"""Memory bounds (issue 7), measured in fresh subprocesses by
benchmarks/memory_roundtrip.py (run that script for the full 1 GiB figure):

- a CPU -> FileBacked -> CPU round trip peaks at most its size above the
  baseline (the source resident), here at 256 MiB; afterwards exactly one
  copy is resident (the CPU source and the file were released);
- DLPack export allocates no storage: 10000 exports of a 256 MiB tensor,
  dropped or held, and 10000 np.from_dlpack imports grow RSS and
  tracemalloc's peak by far less than one copy.
"""
import importlib.util
import os
import sys

import pytest

from support.process import REPO

pytest.importorskip("numpy")
if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc/self/status", allow_module_level=True)
if os.environ.get("STRIDEWEAVE_SANITIZED"):
    pytest.skip("RSS bounds do not apply under ASan (quarantine, shadow memory)", allow_module_level=True)

MIB = 1024 * 1024
SCRIPT = os.path.join(str(REPO), "benchmarks",
                      "memory_roundtrip.py")


@pytest.fixture(scope="module")
def measured():
    spec = importlib.util.spec_from_file_location("memory_roundtrip", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.run(mib=256, exports=10000, export_mib=256)


def test_roundtrip_peak_is_at_most_its_size_above_baseline(measured):
    _, res = measured
    rt = res["roundtrip"]
    assert rt["values_ok"] and rt["source_released"] and rt["file_released"]
    assert rt["peak"] >= rt["baseline"] > rt["process_baseline"] + 200 * MIB  # the source was resident
    assert rt["peak_over_baseline"] <= 256 * MIB, rt
    # The CPU source is freed when the first move commits ...
    assert rt["rss_after_cpu_to_filebacked"] - rt["process_baseline"] < 32 * MIB, rt
    # ... and after the trip one copy (the result) is resident.
    assert abs(rt["rss_after"] - rt["baseline"]) <= 0.05 * 256 * MIB, rt


def test_export_allocates_no_storage(measured):
    _, res = measured
    ex = res["export"]
    assert ex["tensor_bytes"] == 256 * MIB and ex["exports"] == 10000
    assert ex["dropped"]["peak_rss_growth"] < 4 * MIB, ex
    assert ex["dropped"]["tracemalloc_peak"] < 64 * 1024, ex
    # 10000 live capsules: a managed tensor and a capsule each, no storage.
    assert ex["held"]["peak_rss_growth"] < 10000 * 1024, ex
    assert ex["numpy_aliases"] == 10000
    assert ex["numpy"]["peak_rss_growth"] < 4 * MIB, ex


def test_every_bound_of_the_script_holds(measured):
    mod, res = measured
    failed = [desc for desc, ok in mod.check(res) if not ok]
    assert not failed, mod.report(res)
