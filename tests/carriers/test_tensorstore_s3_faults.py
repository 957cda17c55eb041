"""A CPU -> TensorStoreCarrier move to S3 whose server dies mid-move fails
within seconds with the store's error, the source usable again, and a later
create() on a healthy server in the same process is quick. With TensorStore's
own retry default (32 attempts up to 32 s apart) the move stayed pending for
many minutes and the next create() waited behind its retries; the carrier's
default context bounds S3 retries (TensorStoreCarrier docs). The servers are
moto processes on 127.0.0.1 only; the scenario runs in a child process with
a timeout."""
import json
import sys

import pytest

from support import process
from support.process import assert_child_ok

pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install strideweave[tensorstore])")
pytest.importorskip("moto.server", reason="moto[server] provides the loopback S3 server")
pytest.importorskip("boto3")

SCENARIO = r"""
import json, os, socket, subprocess, sys, time
os.environ.update({"AWS_ACCESS_KEY_ID": "strideweave-test", "AWS_SECRET_ACCESS_KEY": "strideweave-test",
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                   "AWS_EC2_METADATA_DISABLED": "true"})
import boto3
import strideweave as sw
from strideweave.carriers.tensorstore import TensorStoreCarrier

HOST = "127.0.0.1"  # never any other address

def server():
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((HOST, port), 0.2).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the moto server did not start"
            time.sleep(0.05)
    endpoint = f"http://{HOST}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="sw-faults")
    spec = {"driver": "zarr3", "kvstore": {"driver": "s3", "bucket": "sw-faults", "path": "t/",
                                           "endpoint": endpoint, "aws_region": "us-east-1"}}
    return p, client, spec

out = {}
dying, client, spec = server()
n = 8 << 20  # 32 MiB in 128 chunks: the move is still running when the server dies
dst = TensorStoreCarrier.create(spec, n, chunk_slots=1 << 16)
src = sw.CPU(n)
src[0], src[n - 1] = 1.5, -2.5
with sw.no_grad():
    h = sw.move_async(sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([n]))), dst)
# Kill the server once the first chunk has arrived, with the move pending.
deadline = time.monotonic() + 60
while not client.list_objects_v2(Bucket="sw-faults", Prefix="t/c/").get("KeyCount"):
    assert time.monotonic() < deadline and not h.done
    time.sleep(0.01)
out["pending_at_kill"] = not h.done
dying.kill()
dying.wait()
start = time.monotonic()
try:
    h.wait(timeout=90)
    out["error"] = None
except TimeoutError:
    out["error"] = "still pending after 90 s"
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
out["failed_after_s"] = time.monotonic() - start
out["source"] = [src.is_owned(), src.is_released(), src.is_mutable(), src[0], src[n - 1]]
src[1] = 3.0  # usable again
out["source_written"] = src[1]

healthy, _, spec2 = server()
start = time.monotonic()
c = TensorStoreCarrier.create(spec2, 16)
with sw.no_grad():
    sw.move(sw.tensor([float(k) for k in range(16)]), c)
    back = sw.move(sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([16]))), sw.CPU(16))
out["later_create_and_moves_s"] = time.monotonic() - start
out["later_values"] = back.tolist()
healthy.kill()
print(json.dumps(out), flush=True)
"""


def test_a_move_to_a_dying_s3_server_fails_quickly_and_gives_the_source_back():
    r = process.run_python(SCENARIO, pythonpath=[process.PACKAGE_ROOT] + [p for p in sys.path if p], timeout=300)
    assert_child_ok(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["pending_at_kill"]
    assert out["error"] is not None and out["error"].startswith("ValueError"), out
    # TensorStore's own words differ between its releases ("All 3 retry
    # attempts failed: ..." here, the last CURL error alone on the release
    # Python 3.10 gets); both name the failed connection.
    assert "connect" in out["error"].lower(), out
    # Three attempts, 0.1 s then 0.2 s apart, per request: seconds, not minutes
    # (the bound leaves room for a loaded machine).
    assert out["failed_after_s"] < 20, out
    assert out["source"] == [False, False, True, 1.5, -2.5]
    assert out["source_written"] == 3.0
    assert out["later_create_and_moves_s"] < 20, out
    assert out["later_values"] == [float(k) for k in range(16)]


def test_the_default_retry_bound_is_the_documented_one():
    from strideweave.carriers import tensorstore as tsc

    assert tsc.S3_REQUEST_RETRIES == {"max_retries": 3, "initial_delay": "0.1s", "max_delay": "1s"}
    doc = " ".join((tsc.__doc__ or "").split())
    assert "at most 3 times in all (``max_retries: 3``), 0.1 s after the first failure" in doc
    assert "at most 1 s apart" in doc
