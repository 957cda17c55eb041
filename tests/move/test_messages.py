"""Move messages name what is wrong and how to fix it (API.md 11, "Messages
name what is wrong"): a dtype mismatch names both dtypes and the fix; a
forward move refused for lack of a reverse route says backward needs it and
that no_grad() moves without one."""
import pytest

import strideweave as sw

from support.builders import F32, I32, cpu_tensor, slots, values
from support.extension import family, tensor_of

# ------------------------------------------------------------ dtype mismatch


@pytest.mark.parametrize("call", [sw.move, sw.move_async], ids=["move", "move_async"])
def test_dtype_mismatch_names_both_dtypes_and_the_fix(call):
    """CPU defaults to Float32 and FileBacked to Floating: the message says
    which is which and how to create a matching destination."""
    t = cpu_tensor([1.0, 2.0])
    dest = sw.FileBacked()
    with pytest.raises(TypeError, match="dtype must match") as info:
        call(t, dest)
    msg = str(info.value)
    assert "destination is DType.Floating" in msg and "tensor is DType.Float32" in msg
    assert "create the destination with dtype=DType.Float32" in msg
    # Refused before anything was claimed or allocated.
    assert not t.carrier.is_released() and not t.carrier.is_owned()
    assert not dest.is_owned() and dest.size() == 0
    # The suggested fix works.
    assert values(sw.move(t, sw.FileBacked(dtype=sw.DType.Float32))) == [1.0, 2.0]


def test_dtype_mismatch_for_an_int_destination():
    t = cpu_tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="dtype must match") as info:
        sw.move(t, sw.CPU(2, dtype=I32))
    msg = str(info.value)
    assert "destination is DType.Int32" in msg and "dtype=DType.Float32" in msg


# ------------------------------------------------------------ no reverse route


class SrcCPU(sw.CPU):
    pass


class DstCPU(sw.CPU):
    pass


class OtherCPU(sw.CPU):
    pass


class PinnedElsewhere(sw.ElementwiseMoveOperation):
    """A reverse operation pinned to a class the pair does not have."""
    source_class = DstCPU
    destination_class = OtherCPU


def src_tensor(vals):
    c = SrcCPU(len(vals))
    for i, v in enumerate(vals):
        c[i] = v
    return sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape([len(vals)])))


def assert_reverse_route_message(msg, src_name, dst_name):
    assert "reverse route" in msg and "backward" in msg and "no_grad()" in msg
    assert src_name in msg and dst_name in msg


def test_pinned_reverse_route_says_backward_needs_it():
    with sw.registered_move_operation(DstCPU, SrcCPU, PinnedElsewhere):
        t = src_tensor([1.0, 2.0])
        with pytest.raises(NotImplementedError) as info:
            sw.move_async(t, DstCPU(2))
        assert_reverse_route_message(str(info.value), "SrcCPU", "DstCPU")
        assert "PinnedElsewhere" in str(info.value)  # the cause is kept
        assert not t.carrier.is_released() and not t.carrier.is_owned()
        # What the message suggests: without grad mode no reverse route is needed.
        with sw.no_grad():
            y = sw.move(t, DstCPU(2))
        assert values(y) == [1.0, 2.0] and y.autograd_ctx is None


def test_missing_definition_reverse_route_says_backward_needs_it():
    """A one-way carrier-definition route: the reverse pair resolves to
    NotImplementedError, reported as backward's need."""
    Host, Packed, log, _ = family(packed_to_host=False)
    t = tensor_of(Host, [1.0, 2.0])
    with pytest.raises(NotImplementedError) as info:
        sw.move_async(t, Packed(2, dtype=F32))
    msg = str(info.value)
    assert_reverse_route_message(msg, "HostSlots", "PackedSlots")
    assert "no transfer route moves PackedSlots to HostSlots" in msg  # the resolver's reason
    assert log.prepared == [] and log.submitted == []
    with sw.no_grad():
        assert values(sw.move(t, Packed(2, dtype=F32))) == [1.0, 2.0]


def test_malformed_reverse_pin_keeps_its_reason():
    """A reverse operation whose pin is not a class cannot serve the pair
    either: same message, with the pin's own complaint as the reason."""

    class BadPin(sw.ElementwiseMoveOperation):
        source_class = "not a class"

    with sw.registered_move_operation(DstCPU, SrcCPU, BadPin):
        t = src_tensor([1.0])
        with pytest.raises(NotImplementedError) as info:
            sw.move_async(t, DstCPU(1))
    assert_reverse_route_message(str(info.value), "SrcCPU", "DstCPU")
    assert "BadPin.source_class must be a Carrier class or None" in str(info.value)
    assert slots(t.carrier) == [1.0]
