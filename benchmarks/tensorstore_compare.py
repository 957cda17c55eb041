"""TensorStore carrier rows of compare.py (python benchmarks/compare.py
--only-tensorstore): StrideWeave's bulk routes against TensorStore's own
``store.write(ndarray)`` / ``store.read()`` on the same spec, and against
FileBacked; the S3 rows run against a moto server on 127.0.0.1 only.

Every sample writes a fresh array (a new path) with the same chunking on
both sides, so neither side overwrites existing chunks; the read samples
read what the write samples wrote. A move's destination is a fresh
``CPU(n, empty=True)`` (unfaulted), as ``store.read()`` allocates a fresh
array."""
import os
import shutil
import socket
import statistics
import tempfile
import time

import numpy as np
import tensorstore as ts

import strideweave as sw
from strideweave.carriers.tensorstore import TensorStoreCarrier

F32 = sw.DType.Float32
ns = time.perf_counter_ns
CHUNK = 4 * 1024 * 1024  # elements per chunk (16 MiB), both sides


def cpu_filled(n):
    c = sw.CPU(n, empty=True)
    np.from_dlpack(sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1))))[:] = np.arange(n, dtype=np.float32)
    return sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))


def create_raw(spec, n):
    return ts.open(spec, create=True, dtype=ts.float32, shape=[n],
                   chunk_layout=ts.ChunkLayout(chunk_shape=[min(CHUNK, n)])).result()


def pair_rows(add, rep, n, label, spec_for, where, target):
    """CPU->store and store->CPU, StrideWeave vs TensorStore, at n elements."""
    w_o, w_t, r_o, r_t = [], [], [], []
    src = np.arange(n, dtype=np.float32)
    for k in range(rep):
        # StrideWeave: move a CPU tensor in, then out.
        x = cpu_filled(n)
        dst = TensorStoreCarrier.create(spec_for(f"sw{k}"), n, chunk_slots=min(CHUNK, n))
        t0 = ns()
        y = sw.move(x, dst)
        t1 = ns()
        back = sw.move(y, sw.CPU(n, empty=True))
        t2 = ns()
        assert back[n - 1] == float(np.float32(n - 1))
        w_o.append(t1 - t0)
        r_o.append(t2 - t1)
        del x, y, back, dst
        # TensorStore alone on the same spec and chunking.
        store = create_raw(spec_for(f"ts{k}"), n)
        t0 = ns()
        store.write(src).result()
        t1 = ns()
        arr = store.read().result()
        t2 = ns()
        assert arr[n - 1] == np.float32(n - 1)
        w_t.append(t1 - t0)
        r_t.append(t2 - t1)
        del arr, store
    med = statistics.median
    add(f"move CPU->TensorStore {where} {label}  vs store.write(ndarray)", med(w_o), med(w_t), target)
    add(f"move TensorStore->CPU {where} {label}  vs store.read()", med(r_o), med(r_t), target)
    return med(w_o) + med(r_o)


def rows(add, rep, mib, s3_mib):
    """Local rows at mib, S3 rows at s3_mib (a size <= 0 skips its rows)."""
    if mib > 0:
        local_rows(add, rep, mib)
    if s3_mib > 0:
        s3_rows(add, rep, s3_mib)


def local_rows(add, rep, mib):
    n = mib * 1024 * 1024 // 4
    label = f"{mib} MiB"
    root = tempfile.mkdtemp(prefix="sw-compare-ts-")
    try:
        def local(name):
            return {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(root, name)}}

        ours_rt = pair_rows(add, rep, n, label, local, "zarr3/file", "<= 1.05")
        fb = []
        for _ in range(rep):
            x = cpu_filled(n)
            t0 = ns()
            f = sw.move(x, sw.FileBacked(dtype=F32))
            back = sw.move(f, sw.CPU(n, empty=True))
            fb.append(ns() - t0)
            del x, f, back
        add(f"CPU->TensorStore->CPU zarr3/file {label}  vs CPU->FileBacked->CPU", ours_rt, statistics.median(fb))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def s3_rows(add, rep, mib):
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        add("S3 rows skipped: moto[server] / boto3 not installed", None, None)
        return
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")

        def s3(name):
            return {"driver": "zarr3", "kvstore": {"driver": "s3", "bucket": "bench", "path": f"{name}/",
                                                   "endpoint": endpoint, "aws_region": "us-east-1"}}

        pair_rows(add, rep, mib * 1024 * 1024 // 4, f"{mib} MiB", s3, "zarr3/S3 (moto, loopback)", "<= 1.05")
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
