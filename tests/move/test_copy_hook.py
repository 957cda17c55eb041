"""A built-in _copy called directly refuses a destination whose dtype is not
the tensor's, exactly as move does (TypeError, "dtype must match"), instead
of copying the bits: Int32 and Float32 share an item size, so a raw copy
turned [1, 2] into [1.4e-45, 2.8e-45]. Nothing is written and both carriers
are given back."""
import pytest

import strideweave as sw

from support.builders import F32, I32, canonical, values
from support.process import assert_child_ok, run_snippet

MESSAGE = "dtype must match"


def pair(src_dtype, dst_kind, dst_dtype):
    src = sw.tensor([1, 2]) if src_dtype is I32 else sw.tensor([1.5, 2.5])
    if dst_kind == "cpu":
        dst = sw.CPU(2, dtype=dst_dtype)
    elif dst_kind == "file":
        dst = sw.FileBacked(dtype=dst_dtype)
        sw.move(sw.tensor([0, 0], dtype=dst_dtype), dst)  # a 2-slot file
    else:
        dst = sw.Generic([0, 0], dtype=dst_dtype)
    return src, dst, sw.Tensor(dst, 0, canonical([2]))


@pytest.mark.parametrize("src_dtype,dst_dtype", [(I32, F32), (F32, I32)])
@pytest.mark.parametrize("dst_kind", ["cpu", "generic"])
def test_elementwise_copy_refuses_int32_float32_pairs(src_dtype, dst_dtype, dst_kind):
    src, dst, out = pair(src_dtype, dst_kind, dst_dtype)
    before = out.tolist()
    with pytest.raises(TypeError, match=MESSAGE) as e:
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    assert str(src_dtype) in str(e.value) and str(dst_dtype) in str(e.value)
    assert out.tolist() == before
    assert src.tolist() == ([1, 2] if src_dtype is I32 else [1.5, 2.5])
    assert not src.carrier.is_owned() and not dst.is_owned()


@pytest.mark.parametrize("src_dtype,dst_dtype", [(I32, F32), (F32, I32)])
def test_bulk_copies_refuse_int32_float32_pairs(src_dtype, dst_dtype):
    src, dst, out = pair(src_dtype, "file", dst_dtype)
    with pytest.raises(TypeError, match=MESSAGE):
        sw.CpuToFileBackedMoveOperation()._copy(src, dst, out, 2)
    assert out.tolist() == [0, 0]
    back = sw.CPU(2, dtype=src_dtype)
    with pytest.raises(TypeError, match=MESSAGE):
        sw.FileBackedToCpuMoveOperation()._copy(out, back, sw.Tensor(back, 0, canonical([2])), 2)
    assert back[0] == 0 and back[1] == 0
    assert not dst.is_owned() and not back.is_owned()


def test_metal_copy_refuses_a_dtype_mismatch(fake):
    src = sw.tensor([1, 2])
    dst = sw.Metal(2, dtype=F32)
    with pytest.raises(TypeError, match=MESSAGE):
        sw.CpuToMetalMoveOperation()._copy(src, dst, sw.Tensor(dst, 0, canonical([2])), 2)
    assert dst[0] == 0.0 and dst[1] == 0.0


@pytest.mark.parametrize("op", [sw.ElementwiseMoveOperation, sw.CpuToFileBackedMoveOperation])
def test_a_matching_dtype_still_copies(op):
    src, dst, out = pair(I32, "file" if op is sw.CpuToFileBackedMoveOperation else "cpu", I32)
    op()._copy(src, dst, out, 2)
    assert out.tolist() == [1, 2]


def test_move_refuses_the_same_pairs_with_the_same_message():
    with pytest.raises(TypeError, match=MESSAGE):
        sw.move(sw.tensor([1, 2]), sw.CPU(2, dtype=F32))


def test_an_operation_instance_reentered_from_a_hook_performs_one_move():
    # forward() checked `used` early but set it only once the job adopted the
    # instance; a destination's allocate hook in between re-entered forward
    # on the same instance, and the outer commit then rewrote the inner
    # result's node (its input became the outer source: wrong gradients).
    from strideweave.carriers import extension as ext

    L2 = sw.Layout.canonical(sw.Shape([2]))
    op = sw.ElementwiseMoveOperation()
    t_inner = sw.Tensor(sw.CPU(2, dtype=F32), 0, L2)
    seen = {}

    def allocate(c, n):
        c._slots = [0.0] * n
        if n and "inner" not in seen:
            seen["inner"] = None
            try:
                seen["inner"] = op.forward(t_inner, sw.CPU(2, dtype=F32))
            except RuntimeError as e:
                seen["inner"] = e

    storage = ext.StorageProvider(
        supports_dtype=lambda c, d: True,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=allocate,
        release=lambda c: c.__dict__.update(_slots=[]),
        read=lambda c, i: c._slots[i],
        write=lambda c, i, v: c._slots.__setitem__(i, v),
        elementwise_fallback=True,
    )
    Grows = type("ReviewGrows", (sw.Carrier,), {})
    ext.register_carrier_definition(Grows, ext.CarrierDefinition(storage))
    t_outer = sw.Tensor(sw.CPU(2, dtype=F32), 0, L2)
    out = op.forward(t_outer, Grows(0, dtype=F32))
    assert out.autograd_ctx is op
    assert op.inputs()[0] is t_outer
    assert isinstance(seen["inner"], RuntimeError)
    assert "already performed a move" in str(seen["inner"])
    assert not t_inner.carrier.is_released()


# ------------------------------------------------------------ a built-in _copy called directly claims its carriers


def cpu_tensor(vals):
    c = sw.CPU(len(vals), dtype=F32)
    for i, v in enumerate(vals):
        c[i] = v
    return sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([len(vals)])))


def test_direct_builtin_copy_claims_carriers_and_gives_them_back():
    src = cpu_tensor([1.0, 2.0, 3.0])
    dst = sw.CPU(3, dtype=F32)
    out = sw.Tensor(dst, 0, src.layout)
    sw.ElementwiseMoveOperation()._copy(src, dst, out, 3)
    assert values(out) == [1.0, 2.0, 3.0]
    assert not src.carrier.is_owned() and not dst.is_owned()
    src.carrier.release()  # given back: releasable again
    dst[0] = 9.0


def test_direct_builtin_copy_refuses_a_destination_owned_by_someone_else():
    src = cpu_tensor([1.0, 2.0])
    dst = sw.CPU(2, dtype=F32)
    token = dst._claim_ownership()
    out = sw.Tensor(dst, 0, src.layout)
    with pytest.raises(RuntimeError, match="owned by another carrier or a pending move"):
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    assert not src.carrier.is_owned()  # the source's claim was given back
    assert dst.is_owned()  # the other owner's claim is untouched
    dst._relinquish_ownership(token)
    assert not dst.is_owned()


def test_direct_builtin_copy_with_owner_access_on_this_thread_works():
    # What TiledEvictable does with its tiers: owned carriers, owner access
    # held by the calling thread.
    src = cpu_tensor([4.0, 5.0])
    dst = sw.CPU(2, dtype=F32)
    ts, td = src.carrier._claim_ownership(), dst._claim_ownership()
    src.carrier._begin_owner_access(ts)
    dst._begin_owner_access(td)
    try:
        out = sw.Tensor(dst, 0, src.layout)
        sw.ElementwiseMoveOperation()._copy(src, dst, out, 2)
    finally:
        src.carrier._end_owner_access(ts)
        dst._end_owner_access(td)
    assert values(out) == [4.0, 5.0]
    assert src.carrier.is_owned() and dst.is_owned()  # our claims stay ours
    src.carrier._relinquish_ownership(ts)
    dst._relinquish_ownership(td)


def test_direct_bulk_copy_claims_carriers():
    src = cpu_tensor([1.0, 2.0, 3.0])
    out = sw.move(cpu_tensor([0.0, 0.0, 0.0]), sw.FileBacked(dtype=F32))
    dst = out.carrier
    sw.CpuToFileBackedMoveOperation()._copy(src, dst, out, 3)
    assert values(out) == [1.0, 2.0, 3.0]
    assert not src.carrier.is_owned() and not dst.is_owned()
    back = sw.CPU(3, dtype=F32)
    out2 = sw.Tensor(back, 0, src.layout)
    sw.FileBackedToCpuMoveOperation()._copy(out, back, out2, 3)
    assert values(out2) == [1.0, 2.0, 3.0]
    dst.release()


def test_release_racing_a_direct_builtin_copy_never_crashes():
    assert_child_ok(run_snippet("""
        import threading
        import strideweave as sw
        F32 = sw.DType.Float32
        n = 1 << 22
        refused = 0
        for round in range(6):
            src = sw.CPU(n, dtype=F32)
            dst = sw.CPU(n, dtype=F32)
            t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([n])))
            out = sw.Tensor(dst, 0, t.layout)
            started = threading.Event()
            def releaser():
                global refused
                started.wait()
                for c in (src, dst):
                    while True:
                        try:
                            c.release()
                            break
                        except RuntimeError as e:
                            assert "owned" in str(e), e
                            refused += 1
            th = threading.Thread(target=releaser)
            th.start()
            started.set()
            try:
                sw.ElementwiseMoveOperation()._copy(t, dst, out, n)
            except RuntimeError as e:
                assert "released" in str(e) or "owned" in str(e), e
            th.join()
            assert src.is_released() and dst.is_released()
        print("ok", refused)
    """))
