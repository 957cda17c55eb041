"""bool is an int subclass, but nowhere a number the library parses: DLPack
version and device pairs, ownership tokens, mode numbers, the dlpack_info()
hook's fields and the private native calls all refuse it, as sizes, offsets,
indices, timeouts and copy counts do."""
import pytest

import strideweave as sw

from support.builders import F32, canonical, carrier_of, flat_layout


def cpu_tensor():
    return sw.tensor([1.0, 2.0])


@pytest.mark.parametrize("pair", [(True, False), (1, True), [False, 0]])
def test_dlpack_max_version_refuses_bools(pair):
    with pytest.raises(ValueError, match="max_version must hold two integers, got bool"):
        cpu_tensor().__dlpack__(max_version=pair)


@pytest.mark.parametrize("pair", [(True, 0), (1, False)])
def test_dlpack_dl_device_refuses_bools(pair):
    with pytest.raises(ValueError, match="dl_device must hold two integers, got bool"):
        cpu_tensor().__dlpack__(dl_device=pair)


def test_integer_pairs_still_work():
    assert cpu_tensor().__dlpack__(max_version=(1, 0)) is not None
    assert cpu_tensor().__dlpack__(dl_device=(1, 0)) is not None


@pytest.mark.parametrize("call", ["_relinquish_ownership", "_begin_owner_access", "_end_owner_access"])
def test_ownership_tokens_refuse_bools(call):
    c = sw.CPU(2)
    token = c._claim_ownership()
    with pytest.raises(TypeError, match="ownership token must be an int, not bool"):
        getattr(c, call)(True)
    assert c.is_owned()
    c._relinquish_ownership(token)
    assert not c.is_owned()


@pytest.mark.parametrize("make", [lambda: sw.Shape([2, 3]), lambda: sw.Stride([1, 2]),
                                  lambda: sw.Layout(sw.Shape([2, 3]), sw.Stride([1, 2]))])
def test_mode_numbers_refuse_bools(make):
    obj = make()
    with pytest.raises(TypeError, match="indices must be integers or slices, not bool"):
        obj[True]
    assert obj[1] == obj[-1]


@pytest.mark.parametrize("field", ["pointer", "device_type", "device_id"])
def test_dlpack_info_fields_refuse_bools(field):
    class Lying(sw.CPU):
        def dlpack_info(self):
            info = dict(super().dlpack_info())
            info[field] = True
            return info

    c = Lying(2)
    with pytest.raises(TypeError, match="bool"):
        sw.Tensor(c, 0, canonical([2])).__dlpack__()


def test_private_native_calls_refuse_bools():
    src, dst = sw.CPU(4), sw.CPU(0)
    with pytest.raises(TypeError, match="grid_shape entries must be ints, not bool"):
        sw.TiledEvictable(src, dst, (True, 4), (1, 1))
    with pytest.raises(TypeError, match="tile_shape entries must be ints, not bool"):
        sw.TiledEvictable(src, dst, (4,), (True,))
    assert not src.is_owned() and not dst.is_owned()
    with sw.profile() as p:
        session = sw._core._profiler_session()
        with pytest.raises(TypeError, match="not bool"):
            sw._core._profiler_record(session, "x", None, None, True, 1, True)
        with pytest.raises(TypeError, match="parent_id must be an int, not bool"):
            sw._core._profiler_record(session, "x", None, None, 0, 1, True, parent_id=True)
    assert p.events() == []


@pytest.mark.parametrize("call,fragment", [
    (lambda: sw.CPU(True), "size must be an int, not bool"),
    (lambda: sw.CPU(size=False), "size must be an int, not bool"),
    (lambda: sw.CPU(4).allocate_like(True), "size must be an int, not bool"),
    (lambda: sw.CPU(4)._reserve(True), "size must be an int, not bool"),
    (lambda: sw.Tensor(sw.CPU(4), True, flat_layout(3)), "offset must be an int"),
    (lambda: sw.CPU(4)[True], "carrier indices must be integers, not bool"),
    (lambda: sw.CPU(4).__setitem__(False, 1.0), "carrier indices must be integers, not bool"),
    (lambda: sw.FileBacked(True), "not bool"),
])
def test_bool_is_refused_as_a_size_offset_or_index(call, fragment):
    with pytest.raises(TypeError, match=fragment):
        call()


def test_bool_is_refused_as_a_wait_timeout_and_a_copy_count():
    src = sw.Tensor(carrier_of([1.0, 2.0]), 0, flat_layout(2))
    h = sw.move_async(src, sw.CPU(2))
    with pytest.raises(TypeError, match="timeout must be a number or None, not bool"):
        h.wait(timeout=True)
    out = h.wait(timeout=10.0)
    assert out.tolist() == [1.0, 2.0]
    from strideweave.core import Subtensor
    with pytest.raises(TypeError, match="offset must be an int, not bool"):
        Subtensor(F32, sw.CPU(2), True, flat_layout(2))
    dst = sw.CPU(1)
    with pytest.raises(TypeError, match="count must be an int, not bool"):
        sw.ElementwiseMoveOperation()._copy(sw.Tensor(carrier_of([1.0]), 0, flat_layout(1)), dst, sw.Tensor(dst, 0, flat_layout(1)), True)
    assert not dst.is_owned()
