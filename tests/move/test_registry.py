"""The legacy exact-pair move registry (spec: "Move registration is explicit,
validated, and process-global"; API.md 8 and 10)."""
import pytest

import strideweave as sw
from strideweave.carriers.move import (
    dispatch_move, register_move_operation, registered_move_operation, unregister_move_operation,
)

from support.builders import canonical, cpu_tensor, values
from support.carriers import DstCPU, SrcCPU
from support.moves import OpA, OpB


def test_register_and_dispatch_an_exact_legacy_pair(clean_pair):
    assert register_move_operation(SrcCPU, DstCPU, OpA) is None
    assert dispatch_move(SrcCPU, DstCPU) is OpA
    # Only that exact pair.
    assert dispatch_move(DstCPU, SrcCPU) is sw.ElementwiseMoveOperation
    assert dispatch_move(sw.CPU, DstCPU) is sw.ElementwiseMoveOperation
    assert dispatch_move(SrcCPU, sw.CPU) is sw.ElementwiseMoveOperation
    # And move uses it.
    src = SrcCPU(2)
    src[0], src[1] = 1.0, 2.0
    out = sw.move(sw.Tensor(src, 0, canonical([2])), DstCPU(2))
    assert type(out.autograd_ctx) is OpA and values(out) == [1.0, 2.0]


def test_keyword_arguments(clean_pair):
    register_move_operation(source_class=SrcCPU, destination_class=DstCPU, operation_class=OpA)
    assert dispatch_move(source_class=SrcCPU, destination_class=DstCPU) is OpA
    assert unregister_move_operation(source_class=SrcCPU, destination_class=DstCPU) is OpA


def test_refuse_to_overwrite_a_registration(clean_pair):
    register_move_operation(SrcCPU, DstCPU, OpA)
    with pytest.raises(ValueError) as e:
        register_move_operation(SrcCPU, DstCPU, OpB)
    assert "SrcCPU" in str(e.value) and "DstCPU" in str(e.value)
    assert dispatch_move(SrcCPU, DstCPU) is OpA
    # Built-in entries are protected the same way.
    with pytest.raises(ValueError) as e:
        register_move_operation(sw.CPU, sw.FileBacked, OpA)
    assert "CPU" in str(e.value) and "FileBacked" in str(e.value)
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


def test_remove_a_registration(clean_pair):
    register_move_operation(SrcCPU, DstCPU, OpA)
    assert unregister_move_operation(SrcCPU, DstCPU) is OpA
    assert dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation
    with pytest.raises(KeyError) as e:
        unregister_move_operation(SrcCPU, DstCPU)
    assert "SrcCPU" in str(e.value) and "DstCPU" in str(e.value)


def test_remove_and_restore_a_builtin_entry():
    removed = unregister_move_operation(sw.FileBacked, sw.CPU)
    try:
        assert removed is sw.FileBackedToCpuMoveOperation
        assert dispatch_move(sw.FileBacked, sw.CPU) is sw.ElementwiseMoveOperation
        fb = sw.FileBacked(dtype=sw.DType.Float32)
        mid = sw.move(cpu_tensor([1.0, 2.0]), fb)
        back = sw.move(mid, sw.CPU(2))  # elementwise fallback now
        assert type(back.autograd_ctx) is sw.ElementwiseMoveOperation
        assert values(back) == [1.0, 2.0]
    finally:
        register_move_operation(sw.FileBacked, sw.CPU, removed)
    assert dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation


def test_do_not_match_a_different_exact_pair(clean_pair):
    class SubSrc(SrcCPU):
        pass

    class SubDst(DstCPU):
        pass

    register_move_operation(SrcCPU, DstCPU, OpA)
    for pair in [(SubSrc, DstCPU), (SrcCPU, SubDst), (SubSrc, SubDst), (sw.Generic, sw.Generic)]:
        assert dispatch_move(*pair) is sw.ElementwiseMoveOperation
        with pytest.raises(KeyError) as e:
            unregister_move_operation(*pair)
        assert pair[0].__name__ in str(e.value) and pair[1].__name__ in str(e.value)
    assert dispatch_move(SrcCPU, DstCPU) is OpA


def test_every_unregistered_pair_uses_the_fallback():
    for pair in [(sw.CPU, sw.CPU), (sw.Generic, sw.CPU), (sw.FileBacked, sw.FileBacked),
                 (sw.CPU, sw.Generic), (sw.Carrier, sw.Carrier)]:
        assert dispatch_move(*pair) is sw.ElementwiseMoveOperation


def test_scope_a_registration_to_a_block(clean_pair):
    with registered_move_operation(SrcCPU, DstCPU, OpA) as op:
        assert op is OpA
        assert dispatch_move(SrcCPU, DstCPU) is OpA
    assert dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation

    class Marker(Exception):
        pass

    with pytest.raises(Marker):
        with registered_move_operation(SrcCPU, DstCPU, OpB):
            assert dispatch_move(SrcCPU, DstCPU) is OpB
            raise Marker()
    assert dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation


def test_scoped_registration_validates_and_rejects_duplicates(clean_pair):
    with pytest.raises(TypeError, match="operation_class"):
        registered_move_operation(SrcCPU, DstCPU, object)
    with pytest.raises(TypeError, match="source_class"):
        registered_move_operation(1, DstCPU, OpA)
    with pytest.raises(ValueError, match="CPU"):
        with registered_move_operation(sw.CPU, sw.FileBacked, OpA):
            pass  # pragma: no cover - never entered
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


def test_scoped_exit_tolerates_an_unregistering_body(clean_pair):
    with registered_move_operation(SrcCPU, DstCPU, OpA):
        unregister_move_operation(SrcCPU, DstCPU)
    assert dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation


@pytest.mark.parametrize("args, param", [
    ((int, DstCPU, OpA), "source_class"),
    ((sw.CPU(1), DstCPU, OpA), "source_class"),
    ((SrcCPU, "x", OpA), "destination_class"),
    ((SrcCPU, sw.Tensor, OpA), "destination_class"),
    ((SrcCPU, DstCPU, sw.Operation), "operation_class"),
    ((SrcCPU, DstCPU, OpA()), "operation_class"),
    ((SrcCPU, DstCPU, None), "operation_class"),
])
def test_register_rejects_nonconforming_arguments(args, param, clean_pair):
    with pytest.raises(TypeError, match=param):
        register_move_operation(*args)
    assert dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation


def test_registration_is_process_global(clean_pair):
    import threading
    register_move_operation(SrcCPU, DstCPU, OpA)
    seen = []
    th = threading.Thread(target=lambda: seen.append(dispatch_move(SrcCPU, DstCPU)))
    th.start()
    th.join(10)
    assert seen == [OpA]


@pytest.mark.skipif(not hasattr(sw, "register_carrier_definition"),
                    reason="CarrierDefinition is the carrier-extension issue (extension.cpp)")
def test_reject_registration_for_a_defined_carrier():
    from strideweave.carriers.extension import CarrierDefinition, StorageProvider

    class Defined(sw.Carrier):
        pass

    storage = StorageProvider(lambda c, d: True, lambda c: 0, lambda c, n: None, lambda c: None,
                              lambda c, i: 0.0, lambda c, i, v: None)
    sw.register_carrier_definition(Defined, CarrierDefinition(storage))
    for call in [lambda: register_move_operation(Defined, sw.CPU, OpA),
                 lambda: register_move_operation(sw.CPU, Defined, OpA),
                 lambda: unregister_move_operation(Defined, sw.CPU),
                 lambda: dispatch_move(sw.CPU, Defined),
                 lambda: registered_move_operation(Defined, sw.CPU, OpA)]:
        with pytest.raises(RuntimeError, match="TransferRoute"):
            call()


# ------------------------------------------------------------ argument errors name the parameter


@pytest.mark.parametrize("call", ["dispatch_move", "unregister_move_operation"])
def test_dispatch_and_unregister_name_the_offending_parameter(call):
    fn = getattr(sw, call)
    with pytest.raises(TypeError, match="source_class"):
        fn(sw.CPU(1), sw.CPU)
    with pytest.raises(TypeError, match="destination_class"):
        fn(sw.CPU, int)
    with pytest.raises(TypeError, match="source_class"):
        fn(None, None)  # the first offending parameter is named


def test_scoped_registration_names_the_destination_parameter():
    class Op(sw.ElementwiseMoveOperation):
        pass

    with pytest.raises(TypeError, match="destination_class"):
        sw.registered_move_operation(sw.CPU, "FileBacked", Op)
    assert sw.dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


def test_a_scoped_registration_registers_on_entry_and_reraises_the_same_exception():
    class Op(sw.ElementwiseMoveOperation):
        pass

    cm = sw.registered_move_operation(SrcCPU, DstCPU, Op)
    assert sw.dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation  # not entered yet
    boom = LookupError("from the body")
    with pytest.raises(LookupError) as e:
        with cm as yielded:
            assert yielded is Op and sw.dispatch_move(SrcCPU, DstCPU) is Op
            raise boom
    assert e.value is boom
    assert sw.dispatch_move(SrcCPU, DstCPU) is sw.ElementwiseMoveOperation
    with pytest.raises(KeyError):
        sw.unregister_move_operation(SrcCPU, DstCPU)
