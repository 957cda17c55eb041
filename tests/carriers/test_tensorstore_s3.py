"""TensorStore carrier against a real S3-compatible server (moto's server
mode), started by the test on the loopback interface only: create, move in,
reopen from a fresh process, move out, compare; store errors surface as the
move's recorded exception and leave the source live."""
import json
import sys

import pytest

from support import process
from support.s3 import spec
import strideweave as sw

pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install tensorstore)")
pytest.importorskip("moto.server", reason="moto[server] provides the loopback S3 server")
boto3 = pytest.importorskip("boto3")

from strideweave.carriers.tensorstore import TensorStoreCarrier, open_tensor  # noqa: E402
from support.process import assert_child_ok

WAIT = 60.0


def cpu_of(vals):
    c = sw.CPU(len(vals))
    for i, v in enumerate(vals):
        c[i] = v
    return c


def slots(c):
    return [c[i] for i in range(c.size())]


def run_python(code):
    """The child also sees this process's whole sys.path: tensorstore and
    moto may live outside the default site-packages (a test venv)."""
    return process.run_python(code, pythonpath=[process.PACKAGE_ROOT] + [p for p in sys.path if p])


def test_s3_end_to_end_across_processes(s3):
    endpoint, client = s3
    client.create_bucket(Bucket="sw-e2e")
    sp = spec(endpoint, "sw-e2e", "tensors/a/")
    vals = [k * 0.75 - 4.0 for k in range(40)]
    dst = TensorStoreCarrier.create(sp, 40, chunk_slots=16)
    with sw.no_grad():
        sw.move(sw.Tensor(cpu_of(vals), 0, sw.Layout.canonical(sw.Shape([40]))), dst)
    dst.release()
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="sw-e2e")["Contents"]}
    assert "tensors/a/zarr.json" in keys and len(keys) == 4  # metadata + three chunks, kept by release()

    # A fresh process reopens the array, moves a strided view out and back in.
    code = f"""
import json, strideweave as sw
from strideweave.carriers.tensorstore import TensorStoreCarrier
spec = json.loads({json.dumps(json.dumps(sp))})
c = TensorStoreCarrier.open(spec)
t = sw.Tensor(c, 2, sw.Layout(sw.Shape([3, 2]), sw.Stride([1, 10])))
with sw.no_grad():
    y = sw.move(t, sw.CPU(13))
    out = [y[i] for i in range(6)]
    back = TensorStoreCarrier.open(spec)
    for i in range(13):
        y.carrier[i] = -1.0 * i
    sw.move(y, back)
print(json.dumps(out))
"""
    r = run_python(code)
    assert_child_ok(r)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [vals[i] for i in (2, 3, 4, 12, 13, 14)]

    # This process sees the other process's write.
    t = open_tensor(sp)
    with sw.no_grad():
        y = sw.move(t, sw.CPU(40))
    assert slots(y.carrier) == [-1.0 * i for i in range(13)] + vals[13:]


def test_s3_missing_bucket_fails_the_move_and_keeps_the_source(s3):
    endpoint, client = s3
    client.create_bucket(Bucket="sw-doomed")
    dst = TensorStoreCarrier.create(spec(endpoint, "sw-doomed", "x/"), 8)
    for o in client.list_objects_v2(Bucket="sw-doomed").get("Contents", []):
        client.delete_object(Bucket="sw-doomed", Key=o["Key"])
    client.delete_bucket(Bucket="sw-doomed")
    src = cpu_of([float(k) for k in range(8)])
    with sw.no_grad():
        h = sw.move_async(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([8]))), dst)
    with pytest.raises(ValueError, match="NoSuchBucket"):  # the store's own message
        h.wait(timeout=WAIT)
    assert not src.is_released() and not src.is_owned() and src.is_mutable()
    assert slots(src) == [float(k) for k in range(8)]
    assert not dst.is_owned()


def test_s3_missing_array_and_bucket_at_open(s3):
    endpoint, client = s3
    client.create_bucket(Bucket="sw-empty")
    with pytest.raises(ValueError, match="NOT_FOUND|not found"):
        TensorStoreCarrier.open(spec(endpoint, "sw-empty", "nothing/"))
    with pytest.raises(ValueError, match="NOT_FOUND"):
        open_tensor(spec(endpoint, "sw-never", "nothing/"))
