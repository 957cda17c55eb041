"""The constructors take a flat shape: an int, a tuple or list of ints, or a
flat Shape (its extents). A hierarchical Shape has no single row-major order
to pick, so it is a TypeError that names it, its leaf extents and the
Layout route, where it used to say only "not strideweave.Shape"."""
import pytest

import strideweave as sw

MAKERS = {
    "zeros": sw.zeros,
    "ones": sw.ones,
    "empty": sw.empty,
    "full": lambda s: sw.full(s, 1.5),
}


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize("shape", [(2, 3), (4,), (1, 2, 1)])
def test_a_flat_shape_is_its_extents(make, shape):
    t = make(sw.Shape(shape))
    assert t.shape == shape and t.layout == make(shape).layout


@pytest.mark.parametrize("name", MAKERS)
@pytest.mark.parametrize("shape,leaves", [(((2, 2), 3), "(2, 2, 3)"), ((4, (2, 3)), "(4, 2, 3)")])
def test_a_hierarchical_shape_is_refused_with_its_leaves(name, shape, leaves):
    s = sw.Shape(shape)
    with pytest.raises(TypeError) as e:
        MAKERS[name](s)
    msg = str(e.value)
    assert msg.startswith(f"{name}() takes a flat shape")
    assert repr(s) in msg and f"leaf extents {leaves}" in msg and "Layout.canonical(shape)" in msg


def test_the_suggested_routes_build_the_tensor():
    s = sw.Shape(((2, 2), 3))
    flat = sw.zeros((2, 2, 3))
    nested = sw.Tensor(sw.CPU(s.size), 0, sw.Layout.canonical(s))
    assert flat.size() == nested.size() == 12 and flat.shape == (2, 2, 3) and nested.shape == (4, 3)
