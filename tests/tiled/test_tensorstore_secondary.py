"""A TensorStoreCarrier as the secondary tier of a TiledEvictable: tile
transfers resolve as move resolves them (here the carrier's definition
routes), run asynchronously, and a tile aligned with the store's chunks
reads and writes whole chunks; a carrier that cannot serve as a tier is
refused at construction, naming what is missing."""
import os
import time

import numpy as np
import pytest

import strideweave as sw
import strideweave.carriers.extension as ext
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet, TileState

from support.tiled import tiles_layout

pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install tensorstore)")
from strideweave.carriers.tensorstore import TensorStoreCarrier  # noqa: E402

F32 = sw.DType.Float32
TILES, TILE = 4, 16


def ramp(n, start=0.0):
    c = sw.CPU(n)
    for i in range(n):
        c[i] = start + i
    return c


def values(t):
    return [t[i] for i in range(t.size())]


def wait_done(h, timeout=30.0):
    """Polls the handle to terminal without wait() (which would run queued
    work on this thread): the transfers run on a worker."""
    deadline = time.monotonic() + timeout
    while not h.done:
        assert time.monotonic() < deadline, "the tiled request never finished"
        time.sleep(0.001)


def test_a_tensorstore_secondary_serves_every_request(tmp_path):
    sec = TensorStoreCarrier.create(str(tmp_path / "w"), TILES * TILE, chunk_slots=TILE)
    te = TiledEvictable(ramp(TILES * TILE), sec, (TILES,), (TILE,))
    full = sw.Tensor(te, 0, te.canonical_layout())
    te.evict(TileSet([(0,), (2,), (3,)]))
    assert te.secondary_tiles == TileSet([(0,), (2,), (3,)])
    r = te.project(full, TileSelection([[3, 0]])).wait()
    assert values(r) == [48.0 + i for i in range(16)] + [float(i) for i in range(16)]
    sel = TileSelection([[2]])
    te.assign(full, sel, sw.Tensor(ramp(TILE, 100.0), 0, tiles_layout((1,), (TILE,)))).wait()
    te.flush().wait()
    te.evict(TileSet([(2,)]))
    te.promote(TileSet([(2,), (3,)]))
    assert values(te.project(full, sel).wait()) == [100.0 + i for i in range(16)]
    out = te.scatter(sw.Tensor(ramp(TILE, -5.0), 0, tiles_layout((1,), (TILE,))), full,
                     TileSelection([[1]])).wait()
    assert values(out.carrier.project(out, TileSelection([[1]])).wait()) == [-5.0 + i for i in range(16)]
    assert sw.reduce_sum(full).item() == sum(range(16)) + sum(range(16, 32)) + sum(range(100, 116)) \
        + sum(range(48, 64))
    te.release()
    # The data persists: a fresh carrier over the array sees it.
    again = TensorStoreCarrier.open(str(tmp_path / "w"))
    assert [again[i] for i in (0, 32, 47, 63)] == [0.0, 100.0, 115.0, 63.0]


def test_tile_transfers_go_through_the_stores_routes_on_a_worker(tmp_path):
    import threading

    sec = TensorStoreCarrier.create(str(tmp_path / "r"), TILES * TILE, chunk_slots=TILE)
    te = TiledEvictable(ramp(TILES * TILE), sec, (TILES,), (TILE,))
    full = sw.Tensor(te, 0, te.canonical_layout())
    with sw.profile() as p:
        h = te.evict_async(TileSet([(1,)]))
        wait_done(h)
        h.wait()
        g = te.project(full, TileSelection([[1]]))
        wait_done(g)
        g.wait()
    done = [e for e in p.events() if e.name == "move.complete"]
    routes = sorted(e.implementation_type.__name__ for e in done)
    assert routes == ["TransferRoute[cpu-to-tensorstore]", "TransferRoute[tensorstore-to-cpu]"]
    assert all(e.thread_id != threading.get_ident() and e.succeeded for e in done)


def test_chunk_aligned_tiles_write_whole_chunks(tmp_path):
    path = tmp_path / "c"
    sec = TensorStoreCarrier.create(str(path), TILES * TILE, chunk_slots=TILE)  # no chunk stored yet
    te = TiledEvictable(ramp(TILES * TILE), sec, (TILES,), (TILE,))
    te.flush(TileSet([(2,)])).wait()
    assert sorted(os.listdir(path / "c")) == ["2"]  # one tile, one chunk object, nothing else
    te.evict(TileSet([(0,), (3,)]))
    assert sorted(os.listdir(path / "c")) == ["0", "2", "3"]


def test_an_empty_tensorstore_secondary_grows_at_the_first_write():
    te = TiledEvictable(ramp(TILES * TILE), TensorStoreCarrier(0), (TILES,), (TILE,))
    assert te.secondary.size() == 0
    te.evict(TileSet([(3,)]))
    assert te.secondary.size() == TILES * TILE
    assert te.tile_state((3,)) == TileState("secondary", True, False)
    assert te[50] == 50.0


def test_row_major_tiles_of_a_tensorstore_array_move_as_their_runs(tmp_path):
    # A (4, 6) array in C order, tiles (2, 3): each tile is two runs.
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    sec = TensorStoreCarrier.create(str(tmp_path / "rm"), 24)
    for i, v in enumerate(a.ravel()):
        sec[i] = float(v)
    te = TiledEvictable(sw.CPU(0), sec, (2, 2), (2, 3), geometry="row-major")
    full = sw.Tensor(te, 0, te.canonical_layout())
    assert np.array_equal(np.asarray(te.project(full, TileSelection([[1], [1, 0]])).wait()),
                          np.concatenate([a[2:4, 3:6], a[2:4, 0:3]], axis=1))
    te.promote(TileSet([(0, 1)]))
    te[4] = -1.0  # row 0, column 4: tile (0, 1)
    te.evict(TileSet([(0, 1)]))
    te.release()
    again = TensorStoreCarrier.open(str(tmp_path / "rm"))
    expect = a.ravel().copy()
    expect[4] = -1.0
    assert [again[i] for i in range(24)] == expect.tolist()


# ------------------------------------------------------------ refusals

def list_storage(fallback):
    return ext.StorageProvider(
        supports_dtype=lambda c, dtype: dtype == F32,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=lambda c, n: setattr(c, "_slots", [0.0] * n),
        release=lambda c: setattr(c, "_slots", []),
        read=lambda c, i: c._slots[i],
        write=lambda c, i, v: c._slots.__setitem__(i, v),
        elementwise_fallback=fallback,
    )


def test_a_secondary_without_a_way_back_is_refused_at_construction():
    # Incoming route only, no fallback: tiles could be evicted to it but
    # never read back.
    InOnly = type("InOnly", (sw.Carrier,), {})
    write = ext.TransferProvider(lambda req: ext.Unsupported("never used"))
    ext.register_carrier_definition(InOnly, ext.CarrierDefinition(
        list_storage(False), (ext.TransferRoute(sw.CPU, InOnly, "cpu-to-inonly", write),)))
    p, s = sw.CPU(0), InOnly(8, dtype=F32)
    with pytest.raises(TypeError, match=r"tiers CPU \(primary\) and InOnly \(secondary\) cannot serve: reading "
                                        r"tiles back needs a transfer route from InOnly to CPU"):
        TiledEvictable(p, s, (2,), (4,))
    assert not p.is_owned() and not s.is_owned()


def test_a_primary_without_routes_is_refused_at_construction():
    Closed = type("Closed", (sw.Carrier,), {})
    ext.register_carrier_definition(Closed, ext.CarrierDefinition(list_storage(False), ()))
    p = Closed(0, dtype=F32)
    with pytest.raises(TypeError, match=r"evicting and flushing tiles needs a transfer route from Closed to FileBacked"):
        TiledEvictable(p, sw.FileBacked(dtype=F32), (2,), (4,))


def test_a_definition_with_the_elementwise_fallback_serves_as_a_tier():
    Fallback = type("Fallback", (sw.Carrier,), {})
    ext.register_carrier_definition(Fallback, ext.CarrierDefinition(list_storage(True), ()))
    te = TiledEvictable(ramp(8), Fallback(0, dtype=F32), (2,), (4,))
    te.evict(TileSet([(1,)]))
    assert te.tile_state((1,)).location == "secondary" and te[6] == 6.0


def test_a_primary_without_allocate_like_is_refused_at_construction():
    from support.carriers import ListCarrier

    p = ListCarrier([0.0] * 8)
    with pytest.raises(TypeError, match=r"primary ListCarrier carrier cannot serve as a tier: it has no allocate_like"):
        TiledEvictable(p, sw.FileBacked(dtype=F32), (2,), (4,))
    assert not p.is_owned()
    # As the secondary it needs none: tiles are only copied into it.
    te = TiledEvictable(sw.CPU(0), ListCarrier([float(i) for i in range(8)]), (2,), (4,))
    assert te[5] == 5.0
