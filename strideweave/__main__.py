"""``python -m strideweave``: the demo, in about twenty lines of output.

1. builds a tensor from NumPy data (``strideweave.tensor``, one native copy);
2. hands it to NumPy, PyTorch and JAX without copying, and takes a NumPy
   array, a torch tensor and a JAX array back the same way
   (``strideweave.from_dlpack``; pointer equality; PyTorch and JAX are
   optional and skipped with a note when missing);
3. moves it out of core into a file (``FileBacked``) and back, both moves
   asynchronous while the host keeps computing;
4. runs a backward pass through both moves;
5. prints the profile and writes a Chrome/Perfetto trace file: to ``--trace
   PATH`` when given (kept), else into a temporary directory that is removed
   before the demo exits (nothing is left behind).

``python -m strideweave --version`` prints the installed version.
"""
import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from typing import Any, Iterator, Optional, Sequence

import strideweave as sw


def _optional(name: str, label: str, pip_name: str) -> "tuple[Any, str]":
    """(the module, "") or (None, the line that says why it is skipped)."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None, f"{label}: not installed, skipped (pip install {pip_name})"
    except Exception as e:  # installed but broken: the demo goes on
        return None, f"{label}: import failed ({type(e).__name__}), skipped"
    return module, ""


def _zero_copy_lines(x: sw.Tensor) -> Iterator[str]:
    """One line per consumer: does its array alias x's storage?"""
    carrier = x.carrier
    assert isinstance(carrier, sw.CPU)
    ptr = carrier.pointer()
    import numpy as np

    yield f"NumPy  np.from_dlpack(x):    same memory={np.from_dlpack(x).ctypes.data == ptr}"
    torch, skipped = _optional("torch.utils.dlpack", "PyTorch", "torch")
    if torch is None:
        yield skipped
    else:
        yield f"PyTorch torch.from_dlpack(x): same memory={torch.from_dlpack(x).data_ptr() == ptr}"
    jnp, skipped = _optional("jax.numpy", "JAX", "jax")
    if jnp is None:
        yield skipped
    else:
        yield f"JAX    jnp.from_dlpack(x):   same memory={jnp.from_dlpack(x).unsafe_buffer_pointer() == ptr}"


def _import_lines() -> Iterator[str]:
    """The way back: strideweave.from_dlpack views each library's array in
    place (one line per producer)."""
    import numpy as np

    b = np.arange(6, dtype=np.float32).reshape(2, 3)[:, 1:]
    v = sw.from_dlpack(b)
    yield (f"NumPy  sw.from_dlpack(b[:, 1:]): same memory={_pointer(v) == b.ctypes.data}, "
           f"{v.layout!r}")
    torch, skipped = _optional("torch", "PyTorch", "torch")
    if torch is None:
        yield skipped
    else:
        t = torch.arange(10, dtype=torch.float32)[4:]
        yield (f"PyTorch sw.from_dlpack(t[4:]): same memory={_pointer(sw.from_dlpack(t)) == t.data_ptr()} "
               "(PyTorch's DLPack C exchange API, no capsule)")
    jnp, skipped = _optional("jax.numpy", "JAX", "jax")
    if jnp is None:
        yield skipped
    else:
        j = jnp.arange(4, dtype=jnp.float32)
        v = sw.from_dlpack(j)
        yield (f"JAX    sw.from_dlpack(j):      same memory={_pointer(v) == j.unsafe_buffer_pointer()}, "
               f"read-only={not v.is_mutable()} (JAX arrays are immutable)")


def _pointer(t: sw.Tensor) -> int:
    carrier = t.carrier
    assert isinstance(carrier, sw.CPU)
    return carrier.pointer()


def _busy(seconds: float) -> int:
    """Host work that runs while a move is in flight (Python arithmetic)."""
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def _parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m strideweave",
        description="The StrideWeave demo: NumPy data in, zero-copy exports, asynchronous moves "
                    "through a file and back, a backward pass through both moves, and a profile.")
    parser.add_argument("--version", action="version", version=f"strideweave {sw.__version__}")
    parser.add_argument("--trace", metavar="PATH",
                        help="write the Chrome/Perfetto trace of the demo to PATH and keep it "
                             "(default: a temporary file, removed before the demo exits)")
    return parser.parse_args(argv)


def _write_trace(prof: sw.Profiler, path: Optional[str]) -> None:
    if path is not None:
        prof.to_chrome_trace(path)
        print(f"trace written: {os.path.abspath(path)} (open it in https://ui.perfetto.dev)")
        return
    with tempfile.TemporaryDirectory(prefix="strideweave-demo-") as scratch:
        trace = os.path.join(scratch, "trace.json")
        prof.to_chrome_trace(trace)
        with open(trace, encoding="utf-8") as f:
            events = len(json.load(f)["traceEvents"])
        print(f"trace: {events} events, {os.path.getsize(trace)} bytes, written to a temporary "
              "directory and removed (--trace PATH keeps it for https://ui.perfetto.dev)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse(argv)
    try:
        import numpy as np
    except ImportError:
        print("the demo needs NumPy: pip install numpy")
        return 1
    a = (np.arange(4 * 250_000, dtype=np.float64).reshape(4, 250_000) % 7) - 3.0
    print(f"data: NumPy {a.dtype} array of shape {a.shape}")

    with sw.profile() as prof:
        x = sw.tensor(a)  # float64 -> Float32, one native copy
        print(f"x = sw.tensor(a): {x.layout!r}, {x.dtype()!r}, equal to a: {np.array_equal(np.asarray(x), a)}")
        for line in _zero_copy_lines(x):
            print("  " + line)
        # (the views above are gone: a move releases the storage they alias)
        print("and back, without a copy (sw.from_dlpack):")
        for line in _import_lines():
            print("  " + line)

        pending = sw.move_async(x, sw.FileBacked(dtype=sw.DType.Float32))
        work = _busy(0.02)
        on_disk = pending.wait()
        disk = on_disk.carrier
        assert isinstance(disk, sw.FileBacked)
        path = disk.path
        print(f"out of core: move_async to {path} "
              f"({os.path.getsize(path)} bytes); {work} loop steps ran meanwhile; "
              f"x's CPU storage released: {x.carrier.is_released()}")
        pending = sw.move_async(on_disk, sw.CPU(x.layout.cosize))
        work = _busy(0.02)
        back = pending.wait()
        print(f"back in core: values intact: {np.array_equal(np.asarray(back), a)}; "
              f"{work} loop steps ran meanwhile")

        loss = sw.reduce_sum(sw.relu(back * 2.0))
        loss.backward()  # through CPU <- FileBacked <- CPU
        grad = x.grad
        assert grad is not None
        g = np.asarray(grad)
        print(f"loss = sum(relu(2*x)) = {loss.item():.0f}; backward through both moves: "
              f"x.grad is {grad.carrier.__class__.__name__}, {sorted(set(g.ravel().tolist()))} "
              f"(2 where x > 0, else 0)")

    print(prof.table())
    _write_trace(prof, args.trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
