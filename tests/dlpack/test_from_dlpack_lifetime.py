"""Lifetime of memory strideweave.from_dlpack adopts: the producer's deleter
runs exactly once, when the storage is finally given up, on every path
(release, a move that releases the source, garbage collection, interpreter
exit), deferred to the last re-export when the carrier is released while
re-exports are outstanding. Counted with strideweave._testing's producer,
whose deleter frees the memory (so a premature call is a use after free
under ASan) and counts."""
import gc
import sys
import threading

import numpy as np
import pytest

import strideweave as sw

from support.carriers import DstCPU
from support import doubles
from support.dlpack import DELETER_NOGIL, consume, deleted, producer_capsule
from support.moves import Gate, WAIT, held_operation
from support.process import assert_child_ok, run_python


def imported(values=(1.0, 2.0, 3.0)):
    return sw.from_dlpack(producer_capsule(list(values), [len(values)]))


def test_release_gives_the_memory_back_once():
    t = imported()
    before = deleted()
    t.carrier.release()
    assert deleted() == before + 1
    assert t.carrier.is_released() and t.carrier.pointer() == 0 and t.carrier.size() == 0
    t.carrier.release()
    del t
    gc.collect()
    assert deleted() == before + 1


def test_garbage_collection_gives_it_back():
    t = imported()
    before = deleted()
    carrier = t.carrier
    del t
    assert deleted() == before  # the carrier is still referenced
    del carrier
    assert deleted() == before + 1


def test_a_reference_cycle_gives_it_back_when_collected():
    gc.collect()
    t = imported()
    before = deleted()
    cycle = [t]
    cycle.append(cycle)
    del t, cycle
    gc.collect()
    assert deleted() == before + 1


@pytest.mark.parametrize("destination", ["cpu", "file"])
def test_a_move_that_releases_the_source_gives_it_back(destination):
    t = imported([1.0, 2.0, 3.0, 4.0])
    before = deleted()
    dest = sw.CPU(4) if destination == "cpu" else sw.FileBacked(dtype=sw.DType.Float32)
    moved = sw.move(t, dest)
    assert deleted() == before + 1
    assert t.carrier.is_released()
    assert moved.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_move_async_gives_it_back_at_the_commit_not_before():
    gate = Gate()
    with sw.registered_move_operation(sw.CPU, DstCPU, held_operation(gate)):
        try:
            t = imported([5.0, 6.0])
            before = deleted()
            h = sw.move_async(t, DstCPU(2))
            assert gate.entered.wait(WAIT)
            assert deleted() == before  # the copy still reads the producer's memory
            gate.release.set()
            out = h.wait(timeout=WAIT)
        finally:
            gate.release.set()
    assert deleted() == before + 1
    assert out.tolist() == [5.0, 6.0]


def test_a_failed_move_keeps_the_memory():
    gate = Gate()
    with sw.registered_move_operation(sw.CPU, DstCPU, held_operation(gate, fail=OSError("no"))):
        try:
            t = imported([5.0, 6.0])
            before = deleted()
            gate.release.set()
            with pytest.raises(OSError):
                sw.move(t, DstCPU(2))
        finally:
            gate.release.set()
    assert deleted() == before and t.tolist() == [5.0, 6.0]
    t.carrier.release()
    assert deleted() == before + 1


def test_release_with_a_reexport_outstanding_defers_the_deleter():
    t = imported([1.0, 2.0, 3.0])
    view = np.from_dlpack(t)
    before = deleted()
    t.carrier.release()
    # The carrier reports released at once ...
    assert t.carrier.is_released() and t.carrier.pointer() == 0 and t.carrier.size() == 0
    # ... while the re-export still reads the producer's memory: foreign
    # memory is not remapped to zeros.
    assert deleted() == before
    assert view.tolist() == [1.0, 2.0, 3.0]
    del view
    assert deleted() == before + 1


def test_the_last_of_several_reexports_gives_it_back():
    t = imported([1.0, 2.0])
    views = [np.from_dlpack(t), np.from_dlpack(t), t.__dlpack__(max_version=(1, 0))]
    before = deleted()
    del t
    gc.collect()
    while views:
        assert deleted() == before
        views.pop()
    assert deleted() == before + 1


def test_a_move_with_a_reexport_outstanding_defers_too():
    t = imported([1.0, 2.0])
    view = np.from_dlpack(t)
    before = deleted()
    moved = sw.move(t, sw.CPU(2))
    assert deleted() == before and view.tolist() == [1.0, 2.0]
    del view
    assert deleted() == before + 1
    assert moved.tolist() == [1.0, 2.0]


def test_a_reexport_deleted_on_a_thread_without_the_gil():
    t = imported([1.0, 2.0])
    address, deleter = consume(t.__dlpack__(max_version=(1, 0)))
    before = deleted()
    t.carrier.release()
    del t
    assert deleted() == before
    call = DELETER_NOGIL(deleter)  # releases the GIL for the call
    worker = threading.Thread(target=call, args=(address,))
    worker.start()
    worker.join(WAIT)
    assert not worker.is_alive()
    assert deleted() == before + 1


def test_a_numpy_array_is_referenced_exactly_while_imported():
    a = np.arange(4, dtype=np.float32)
    base = sys.getrefcount(a)
    t = sw.from_dlpack(a)
    assert sys.getrefcount(a) == base + 1  # NumPy's export holds the array
    t.carrier.release()
    assert sys.getrefcount(a) == base
    for _ in range(1000):
        sw.from_dlpack(a)
        sw.from_dlpack(a, copy=True)
        sw.from_dlpack(a.__dlpack__())
    assert sys.getrefcount(a) == base


def test_every_import_is_given_back_once_in_bulk():
    before = deleted()
    kept = [imported() for _ in range(200)]
    exports = [np.from_dlpack(t) for t in kept[:100]]
    for t in kept:
        t.carrier.release()
    assert deleted() == before + 100
    del kept, exports
    gc.collect()
    assert deleted() == before + 200


EXIT_PRELUDE = """
import os, sys
import numpy as np
import strideweave as sw
from strideweave import _testing
_testing.dlpack_report_deletions(1)
def imported():
    return sw.from_dlpack(_testing.dlpack_capsule(np.arange(3, dtype=np.float32).tobytes(), [3]))
"""


@pytest.mark.parametrize(
    "body",
    [
        "t = imported()",
        "t = imported(); view = np.from_dlpack(t)",
        "t = imported(); view = np.from_dlpack(t); t.carrier.release()",
        "t = imported(); cycle = [t]; cycle.append(cycle)",
        "t = imported(); f = sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))",
    ],
    ids=["held", "reexported", "released-reexported", "in-a-cycle", "moved"],
)
def test_interpreter_exit_gives_it_back_exactly_once(body):
    doubles.testing_extension()  # the child's prelude imports it
    r = run_python(EXIT_PRELUDE + body + "\nsys.stdout.flush()\n", flags=("-X", "dev"), timeout=60)
    assert_child_ok(r)
    assert r.stdout.count("deleted\n") == 1, r.stdout


def test_exit_with_a_reexport_held_by_torch():
    pytest.importorskip("torch")
    doubles.testing_extension()  # the child's prelude imports it
    r = run_python(EXIT_PRELUDE + "import torch\nt = imported()\nkeep = torch.from_dlpack(t)\n"
                   "t.carrier.release()\nassert keep.tolist() == [0.0, 1.0, 2.0]\nsys.stdout.flush()\n",
                   flags=("-X", "dev"), timeout=120)
    assert_child_ok(r)
    assert r.stdout.count("deleted\n") <= 1, r.stdout  # torch may or may not free at exit; never twice
