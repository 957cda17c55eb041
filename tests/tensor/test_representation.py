"""Multi-subtensor tensors (a compound dtype of several planes): every
operation that cannot take one refuses it first, without touching a
carrier; pure views still work; TensorRepresentation validation; a
one-plane compound is a single-subtensor tensor."""
import pytest

import strideweave as sw
from strideweave import CompoundDType, CPU, DType, Generic, Layout, Shape, Stride, Tensor
from strideweave.core import Subtensor, TensorRepresentation


F32, I32 = DType.Float32, DType.Int32


def lay(*extents):
    return Layout.canonical(Shape(*extents))


class Planar(sw.CompoundDType):
    simple_types = (F32, I32)


def planar():
    from strideweave.core import Subtensor, TensorRepresentation

    a, b = CPU(4), CPU(4, dtype=I32)
    layout = lay(4)
    rep = TensorRepresentation(Planar(), [Subtensor(F32, a, 0, layout), Subtensor(I32, b, 0, layout)], [layout])
    return Tensor._from_representation(rep), (a, b)


def _setitem(t, key, value):
    t[key] = value


MULTI_CALLS = {
    "DLPack export": [lambda t: t.__dlpack__(), lambda t: t.__dlpack__(max_version=(1, 0)),
                      lambda t: t.__dlpack__(copy=True, dl_device="bad", max_version=-1),
                      lambda t: t.__dlpack_device__()],
    "move": [lambda t: sw.move(t, CPU(4)), lambda t: sw.move(t, "not a carrier")],
    "move_async": [lambda t: sw.move_async(t, CPU(4)), lambda t: sw.move_async(t, None)],
    "indexing": [lambda t: t[0], lambda t: t[99], lambda t: t["bad"], lambda t: _setitem(t, 0, 1.0),
                 lambda t: _setitem(t, 99, "bad")],
    "backward": [lambda t: t.backward(), lambda t: t.backward("bad", retain_graph=True)],
}


@pytest.mark.parametrize("reason", sorted(MULTI_CALLS))
def test_multi_subtensor_rejected_first_without_touching_carriers(reason):
    t, carriers = planar()
    state = [(c.version, c.is_released(), c.is_owned(), c[0]) for c in carriers]
    for call in MULTI_CALLS[reason]:
        with pytest.raises(NotImplementedError) as e:
            call(t)
        msg = str(e.value)
        assert msg.startswith("Multi-subtensor Tensor ") and "is not implemented" in msg
        # move_async is the move path: its reason may read "move" or "move_async".
        expected = ("move",) if reason == "move_async" else (reason,)
        assert any(f"Multi-subtensor Tensor {r}" in msg for r in expected), msg
    assert [(c.version, c.is_released(), c.is_owned(), c[0]) for c in carriers] == state


def test_multi_subtensor_pure_views_still_work():
    t, _ = planar()
    assert t.size() == 4 and isinstance(t.dtype(), Planar)
    assert t.layout == lay(4)
    assert not t.is_mutable()  # single subtensor is part of the predicate


def test_single_subtensor_representation_builds_a_plain_tensor():
    from strideweave.core import Subtensor, TensorRepresentation

    c = CPU(2)
    t = Tensor._from_representation(TensorRepresentation(F32, [Subtensor(F32, c, 0, lay(2))], []))
    assert t.carrier is c and t.is_mutable()
    t[1] = 3.0
    assert c[1] == 3.0


def _rep(subs, adjacent, dtype=None):
    from strideweave.core import TensorRepresentation

    return TensorRepresentation(dtype or Planar(), subs, adjacent)


def _bad_representations():
    from strideweave.core import Subtensor as S

    f, i, l4 = CPU(4), CPU(4, dtype=I32), lay(4)
    return [
        ("plane count", lambda: _rep([S(F32, f, 0, l4)], []), "planes"),
        ("plane dtype", lambda: _rep([S(F32, f, 0, l4), S(F32, f, 0, l4)], [l4]), "plane"),
        ("carrier dtype", lambda: _rep([S(F32, f, 0, l4), S(I32, f, 0, l4)], [l4]), "carrier"),
        ("span", lambda: _rep([S(F32, f, 1, l4), S(I32, i, 0, l4)], [l4]), "exceeds"),
        ("carrier class", lambda: _rep([S(F32, f, 0, l4), S(I32, Generic([0] * 4, dtype=I32), 0, l4)], [l4]),
         "exact class"),
        ("adjacent domain", lambda: _rep([S(F32, f, 0, l4), S(I32, i, 0, l4)], [lay(2)]), "domain"),
        ("adjacent count", lambda: _rep([S(F32, f, 0, l4), S(I32, i, 0, l4)], []), "adjacent"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_representation_validation(case):
    name, build, fragment = _bad_representations()[case]
    with pytest.raises(ValueError, match=fragment):
        Tensor._from_representation(build())


def test_from_representation_requires_a_representation():
    with pytest.raises(TypeError):
        Tensor._from_representation(5)


class OnePlane(sw.CompoundDType):
    simple_types = (F32,)


def one_plane(values=(1.0, 2.0)):
    from strideweave.core import Subtensor, TensorRepresentation

    c = CPU(len(values))
    for i, v in enumerate(values):
        c[i] = v
    layout = lay(len(values))
    return Tensor._from_representation(TensorRepresentation(OnePlane(), [Subtensor(F32, c, 0, layout)], [])), c


def test_one_plane_compound_is_a_single_subtensor_tensor():
    t, c = one_plane()
    assert isinstance(t.dtype(), OnePlane) and t.carrier is c
    assert t.is_mutable()  # single subtensor AND a publicly mutable carrier
    assert not t.is_differentiable()
    assert t[1] == 2.0
    t[0] = 5.0
    assert c[0] == 5.0 and c.version == 3
    rep = t._representation
    assert isinstance(rep.logical_dtype, OnePlane) and [s.dtype for s in rep.subtensors] == [F32]


def test_one_plane_compound_dlpack_fails_on_its_dtype():
    # Spec: every compound logical dtype fails export with BufferError; the
    # device query depends only on the carrier and the one-subtensor rule.
    t, c = one_plane()
    assert t.__dlpack_device__() == (1, 0)
    for kwargs in ({}, {"max_version": (1, 0)}):
        with pytest.raises(BufferError, match="supports only Float32 and Int32"):
            t.__dlpack__(**kwargs)
    assert c.version == 2


def test_one_plane_compound_broadcast_view_keeps_the_logical_dtype():
    t, c = one_plane((3.0,))
    b = sw.broadcast_to(t, Shape(4))
    assert b.carrier is c and isinstance(b.dtype(), OnePlane)
    assert [b[i] for i in range(4)] == [3.0] * 4


def test_representation_span_check_does_not_overflow():
    class OnePlane(CompoundDType):
        simple_types = (DType.Float32,)

    # offset + cosize wraps past INT64_MAX: must still be "exceeds".
    sub = Subtensor(DType.Float32, CPU(4), 2**62, Layout(Shape(2), Stride(2**62 - 1)))
    with pytest.raises(ValueError, match="span exceeds carrier size"):
        Tensor._from_representation(TensorRepresentation(OnePlane(), [sub], []))
