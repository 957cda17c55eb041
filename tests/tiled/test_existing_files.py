"""TiledEvictable over a region of an existing file (FileBacked.open): an
.npy file's or a safetensors tensor's data wrapped where it is, one expert
per tile with the row-major geometry. No staging copy: building the carrier
reads nothing and a projection's peak memory is the selected tiles plus a
constant; clean tiles are never written back; a dirty tile flushed lands at
its place in the data, the header untouched; a read-only region cannot be
a tier."""
import json
import struct

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet

from support.tiled import HWM_CHILD_PRELUDE, hwm_only, run_hwm_child

F32 = sw.DType.Float32
E, R, C = 8, 4, 6


def npy_start(path):
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        read(f)
        return f.tell()


def experts_npy(tmp_path):
    a = np.arange(E * R * C, dtype=np.float32).reshape(E, R, C)
    path = tmp_path / "experts.npy"
    np.save(path, a)
    return a, path, npy_start(path)


def test_a_dirty_expert_flushes_into_the_npy_data_and_the_header_stays(tmp_path):
    a, path, start = experts_npy(tmp_path)
    header = path.read_bytes()[:start]
    te = TiledEvictable(sw.CPU(0), sw.FileBacked.open(path, dtype=F32, offset=start, mutable=True),
                        (E, 1, 1), (1, R, C), geometry="row-major")
    w = sw.Tensor(te, 0, te.canonical_layout())
    te.promote(TileSet([(3, 0, 0), (6, 0, 0)]))
    te.evict(TileSet([(6, 0, 0)]))                 # clean: nothing written
    sel = TileSelection([[3], [0], [0]])
    c = te.project(w, sel).wait()
    np.from_dlpack(c)[:] = -1.0
    te.assign(w, sel, c).wait()
    te.flush().wait()
    te.release()
    data = path.read_bytes()
    assert data[:start] == header
    expected = a.copy()
    expected[3] = -1.0
    assert np.array_equal(np.load(path), expected)


def test_clean_tiles_never_write_the_file(tmp_path):
    a, path, start = experts_npy(tmp_path)
    before = path.stat().st_mtime_ns, path.read_bytes()
    te = TiledEvictable(sw.CPU(0), sw.FileBacked.open(path, dtype=F32, offset=start, mutable=True),
                        (E, 1, 1), (1, R, C), geometry="row-major")
    w = sw.Tensor(te, 0, te.canonical_layout())
    every = TileSet([(e, 0, 0) for e in range(E)])
    te.promote(every)
    te.project(w, TileSelection([[7, 1], [0], [0]])).wait()
    te.evict(every)
    te.flush().wait()
    te.release()
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


def test_a_read_only_region_cannot_be_a_tier(tmp_path):
    _, path, start = experts_npy(tmp_path)
    fb = sw.FileBacked.open(path, dtype=F32, offset=start)
    with pytest.raises(RuntimeError, match="secondary FileBacked carrier is not mutable"):
        TiledEvictable(sw.CPU(0), fb, (E, 1, 1), (1, R, C), geometry="row-major")
    assert not fb.is_owned()


def test_a_region_of_the_wrong_size_is_refused(tmp_path):
    _, path, start = experts_npy(tmp_path)
    fb = sw.FileBacked.open(path, dtype=F32, offset=start, slots=E * R * C - 1, mutable=True)
    with pytest.raises(ValueError):
        TiledEvictable(sw.CPU(0), fb, (E, 1, 1), (1, R, C), geometry="row-major")


# 64 experts of 512 x 512 Float32 (64 MiB): the file is written expert by
# expert (no 64 MiB array in this process), then VmHWM is reset; building
# the carrier and projecting 4 experts (4 MiB) may add the selection and a
# constant, never the file.
WRAP = HWM_CHILD_PRELUDE + r"""
import struct, sys
from strideweave.carriers.tiled_evictable import TileSelection
E, R, C = 64, 512, 512
path, kind = sys.argv[1], sys.argv[2]
block = np.arange(R * C, dtype=np.float32).reshape(R, C)
if kind == "npy":
    from numpy.lib.format import open_memmap
    m = open_memmap(path, mode="w+", dtype=np.float32, shape=(E, R, C))
    for e in range(E):
        m[e] = block + e
    m.flush()
    del m
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        (np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0)(f)
        start, slots = f.tell(), None
else:
    header = json.dumps({"experts": {"dtype": "F32", "shape": [E, R, C], "data_offsets": [0, E * R * C * 4]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode())
        for e in range(E):
            f.write((block + e).tobytes())
    start, slots = 8 + len(header), E * R * C
import os
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the first reads come from disk, as a cold start would
os.close(fd)
reset()
base = hwm()
te = TiledEvictable(sw.CPU(0), sw.FileBacked.open(path, dtype=sw.DType.Float32, offset=start, slots=slots,
                                                  mutable=True), (E, 1, 1), (1, R, C), geometry="row-major")
built = hwm() - base
w = sw.Tensor(te, 0, te.canonical_layout())
r = te.project(w, TileSelection([[60, 3, 17, 42], [0], [0]])).wait()
a = np.from_dlpack(r)
ok = bool(a.shape == (4, R, C) and a[0, 5, 7] == block[5, 7] + 60 and a[3, 511, 511] == block[511, 511] + 42)
print(json.dumps({"built": built, "peak": hwm() - base, "ok": ok}))
"""


@hwm_only
@pytest.mark.parametrize("kind", ["npy", "safetensors"])
def test_wrapping_experts_in_place_costs_the_selection_not_the_file(tmp_path, kind):
    out = run_hwm_child(WRAP.replace("sys.argv[1]", repr(str(tmp_path / f"experts.{kind}")))
                        .replace("sys.argv[2]", repr(kind)), timeout=300)
    MiB = 1 << 20
    assert out["ok"], out
    assert out["built"] < 2 * MiB, out        # nothing staged or read at construction
    assert out["peak"] < 4 * MiB + 8 * MiB, out  # the 4 selected experts plus a constant


def test_the_safetensors_layout_written_by_hand_matches_the_library(tmp_path):
    # (The peak-memory child writes its safetensors file by hand, expert by
    # expert, to stay small: check that layout against the library's.)
    pytest.importorskip("safetensors")
    from safetensors.numpy import load_file

    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    header = json.dumps({"experts": {"dtype": "F32", "shape": [2, 3, 4], "data_offsets": [0, a.nbytes]}})
    header += " " * (-len(header) % 8)
    path = tmp_path / "hand.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + a.tobytes())
    assert np.array_equal(load_file(str(path))["experts"], a)
