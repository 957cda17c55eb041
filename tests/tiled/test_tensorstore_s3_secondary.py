"""A zarr array on a local S3 server (moto on 127.0.0.1 only) as the
secondary tier of TiledEvictables in several processes at once: readers
project their tiles again and again while this process assigns and flushes
other tiles; after reopening, every process sees the flushed values."""
import json
import select
import subprocess
import sys
import time

import pytest

import strideweave as sw

from support import process

pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install tensorstore)")
pytest.importorskip("moto.server", reason="moto[server] provides the loopback S3 server")
pytest.importorskip("boto3")

from strideweave.carriers.tensorstore import TensorStoreCarrier  # noqa: E402
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection, TileSet  # noqa: E402
from support.s3 import CREDENTIALS, spec

TILES, TILE, READERS = 8, 16, 3
READ = [0, 1, 2, 3]      # the tiles the readers project
WRITE = [4, 5, 6, 7]     # the tiles the writer assigns and flushes

READER = r"""
import json, sys, threading
import strideweave as sw
from strideweave.carriers.tensorstore import TensorStoreCarrier
from strideweave.carriers.tiled_evictable import TiledEvictable, TileSelection

spec = json.loads(sys.argv[1])
TILES, TILE, READ = 8, 16, [0, 1, 2, 3]

def open_tiled():
    te = TiledEvictable(sw.CPU(0), TensorStoreCarrier.open(spec), (TILES,), (TILE,))
    return te, sw.Tensor(te, 0, te.canonical_layout())

def project(te, full, tiles):
    r = te.project(full, TileSelection([tiles])).wait()
    return [r[i] for i in range(r.size())]

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
te, full = open_tiled()
want = [float(t * TILE + i) for t in READ for i in range(TILE)]
rounds = 0
while True:
    got = project(te, full, READ)
    assert got == want, got[:4]
    rounds += 1
    if rounds == 1:
        print("ready", flush=True)
    if stop.is_set() or rounds > 5000:
        break
te.release()
te, full = open_tiled()  # reopened: the writer's flush is visible
print(json.dumps({"rounds": rounds, "all": project(te, full, list(range(TILES)))}), flush=True)
"""


def readline(proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            break
    return ""


def test_readers_in_several_processes_see_a_writers_flushed_tiles(s3, tmp_path):
    endpoint, client = s3
    client.create_bucket(Bucket="sw-tiled")
    sp = spec(endpoint, "sw-tiled", "experts/")
    # The array: tile t holds t*16 .. t*16+15, one chunk per tile.
    ramp = sw.CPU(TILES * TILE)
    for i in range(TILES * TILE):
        ramp[i] = float(i)
    te = TiledEvictable(ramp, TensorStoreCarrier.create(sp, TILES * TILE, chunk_slots=TILE), (TILES,), (TILE,))
    te.flush().wait()
    full = sw.Tensor(te, 0, te.canonical_layout())

    env = process.child_env(CREDENTIALS, pythonpath=[p for p in sys.path if p])
    readers = [subprocess.Popen([sys.executable, "-c", READER, json.dumps(sp)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for _ in range(READERS)]
    try:
        for r in readers:
            line = readline(r, 120)
            assert line.strip() == "ready", (line, r.stderr.read() if r.poll() is not None else "")
        # Every reader is projecting now; this process rewrites other tiles.
        sel = TileSelection([WRITE])
        compact = te.project(full, sel).wait()
        for i in range(compact.size()):
            compact.carrier[i] = -1.0 - i
        te.assign(full, sel, compact).wait()
        assert te.dirty_tiles == sel.tile_set
        te.flush().wait()
        assert te.dirty_tiles == TileSet()
        outs = []
        for r in readers:
            out, err = r.communicate("stop\n", timeout=120)
            assert r.returncode == 0, f"reader exited with status {r.returncode}\n{out}\n{err}"
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for r in readers:
            if r.poll() is None:
                r.kill()
                r.communicate()
    written = [-1.0 - i for i in range(len(WRITE) * TILE)]
    expected = [float(i) for i in range(len(READ) * TILE)] + written
    for o in outs:
        assert o["rounds"] >= 1 and o["all"] == expected
    te.release()
    # And this process, reopening, sees the same.
    again = TiledEvictable(sw.CPU(0), TensorStoreCarrier.open(sp), (TILES,), (TILE,))
    r = again.project(sw.Tensor(again, 0, again.canonical_layout()), TileSelection([list(range(TILES))])).wait()
    assert [r[i] for i in range(r.size())] == expected
