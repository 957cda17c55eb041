"""Property tests for Shape, Stride and Layout: random trees, strides and keys
raise only the documented exceptions, and Layout.index agrees with a
pure-Python reference implementation of API.md section 2."""
import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from strideweave import Layout, Shape, Stride

INT64_MAX = 2**63 - 1
NOT_IN_DOMAIN = "Key is not in domain of shape"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- reference


def ref_leaves(tree):
    if isinstance(tree, int):
        return [tree]
    return [v for c in tree for v in ref_leaves(c)]


def ref_depth(tree):
    if isinstance(tree, int):
        return 0
    return 1 + max((ref_depth(c) for c in tree), default=0)


def ref_profile(tree):
    if isinstance(tree, int):
        return None
    return tuple(ref_profile(c) for c in tree)


def ref_mode_index(shape, stride, ordinal):
    """Colexicographic ordinal within a mode -> index (first leaf fastest)."""
    index = 0
    for e, s in zip(ref_leaves(shape), ref_leaves(stride)):
        index += (ordinal % e) * s
        ordinal //= e
    return index


def ref_part(part, shape, stride):
    if isinstance(part, bool):
        raise TypeError("bool part")
    if isinstance(part, int):
        if not 0 <= part < math.prod(ref_leaves(shape)):
            raise ValueError(NOT_IN_DOMAIN)
        return ref_mode_index(shape, stride, part)
    if not isinstance(part, (tuple, list)):
        raise TypeError("bad part")
    if isinstance(shape, int) or len(part) != len(shape):
        raise ValueError(NOT_IN_DOMAIN)
    return sum(ref_part(p, sh, sd) for p, sh, sd in zip(part, shape, stride))


def ref_index(key, shape, stride):
    """shape/stride are top-level tuples; key as API.md section 2 describes."""
    return ref_part(key, shape, stride)


def to_lists(tree):
    """Nested tuples -> a mix the constructors must accept."""
    if isinstance(tree, int):
        return tree
    return [to_lists(c) for c in tree]


# ---------------------------------------------------------------- strategies


def trees(leaf, max_leaves=6):
    return st.recursive(
        leaf,
        lambda children: st.lists(children, min_size=0, max_size=3).map(tuple),
        max_leaves=max_leaves,
    )


def top_levels(leaf, max_leaves=6):
    return st.lists(trees(leaf, max_leaves), min_size=0, max_size=4).map(tuple)


def strides_for(shape_top, values):
    """A stride tree congruent to shape_top."""

    def build(t):
        if isinstance(t, int):
            return values
        return st.tuples(*[build(c) for c in t])

    return build(shape_top)


junk = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.none(),
    st.text(max_size=3),
    st.binary(max_size=2),
    st.integers(min_value=-(2**70), max_value=2**70),
)
any_items = st.recursive(junk, lambda c: st.lists(c, max_size=3) | st.lists(c, max_size=3).map(tuple), max_leaves=8)

small_extent = st.integers(min_value=1, max_value=4)
small_stride = st.integers(min_value=0, max_value=12)


@st.composite
def small_layouts(draw):
    shape = draw(top_levels(small_extent))
    stride = draw(strides_for(shape, small_stride))
    return shape, stride


def keys_for(shape):
    """Mostly well-formed keys, with random damage."""

    def part(t):
        if isinstance(t, int):
            return st.integers(min_value=-1, max_value=t) | st.integers(min_value=-(2**70), max_value=2**70)
        n = math.prod(ref_leaves(t))
        nested = st.tuples(*[part(c) for c in t])
        return st.one_of(
            st.integers(min_value=-1, max_value=n),
            nested,
            nested.map(list),
            nested.map(lambda x: x + (0,)),
            nested.map(lambda x: x[:-1]),
            junk,
        )

    return st.one_of(part(shape), junk)


# ---------------------------------------------------------------- properties


@SETTINGS
@given(any_items, st.booleans())
def test_constructors_raise_only_value_error(items, variadic):
    for cls in (Shape, Stride):
        try:
            obj = cls(*items) if variadic and isinstance(items, (list, tuple)) else cls(items)
        except ValueError:
            continue
        # Whatever it accepted must be a well-formed tree of int64 leaves.
        top = obj.top_level
        assert isinstance(top, tuple)
        assert all(type(v) is int for v in ref_leaves(top))
        assert all((v >= 1 if cls is Shape else v >= 0) and v <= INT64_MAX for v in ref_leaves(top))
        assert cls(top) == obj


@SETTINGS
@given(top_levels(st.integers(min_value=-2, max_value=2**40)))
def test_shape_matches_reference(top):
    leaves = ref_leaves(top)
    valid = all(v >= 1 for v in leaves) and math.prod(leaves) <= INT64_MAX
    if not valid:
        try:
            Shape(to_lists(top))
        except ValueError:
            return
        raise AssertionError("invalid shape accepted")
    s = Shape(to_lists(top))
    assert s == Shape(top)
    # A lone iterable argument is the single-iterable form, so the variadic
    # form agrees except for exactly one nested mode (Shape([3, 4]) is (3, 4)).
    if len(top) != 1 or isinstance(top[0], int):
        assert Shape(*to_lists(top)) == s
    else:
        assert Shape(*to_lists(top)).top_level == top[0]
    assert s.top_level == top
    assert len(s) == len(top)
    assert s.depth == ref_depth(top)
    assert s.size == math.prod(leaves)
    assert repr(s).startswith("Shape<(")
    for i, mode in enumerate(top):
        got = s[i]
        assert (got == mode) if isinstance(mode, int) else (got.top_level == mode)
    assert s[1:].top_level == top[1:]


@SETTINGS
@given(top_levels(st.integers(min_value=1, max_value=2**33)), st.data())
def test_layout_size_cosize_and_overflow(shape, data):
    assume(math.prod(ref_leaves(shape)) <= INT64_MAX)
    stride = data.draw(strides_for(shape, st.integers(min_value=0, max_value=2**62)))
    extents, strides = ref_leaves(shape), ref_leaves(stride)
    cosize = 1 + sum(s * (e - 1) for e, s in zip(extents, strides))
    try:
        layout = Layout(Shape(shape), Stride(stride))
    except ValueError as e:
        assert cosize > INT64_MAX and "cosize overflows" in str(e)
        return
    assert cosize <= INT64_MAX
    assert layout.size == math.prod(extents)
    assert layout.cosize == cosize
    assert layout.leaves() == list(zip(extents, strides))
    assert isinstance(layout.is_injective, bool)  # decided without enumeration


@SETTINGS
@given(small_layouts(), st.data())
def test_index_matches_reference(layout_trees, data):
    shape, stride = layout_trees
    layout = Layout(Shape(shape), Stride(stride))
    for _ in range(5):
        key = data.draw(keys_for(shape))
        try:
            expected = ref_index(key, shape, stride)
        except (TypeError, ValueError) as e:
            expected_exc = type(e)
            try:
                layout.index(key)
            except expected_exc as got:
                if expected_exc is ValueError:
                    # API.md section 11: the message names the key and the shape.
                    assert str(got) == f"{NOT_IN_DOMAIN}: key {key!r} is outside {Shape(shape)!r}"
                continue
            raise AssertionError(f"{key!r} should raise {expected_exc.__name__}")
        assert layout.index(key) == expected
        assert layout(key) == expected


@SETTINGS
@given(small_layouts())
def test_ordinals_and_injectivity_match_brute_force(layout_trees):
    shape, stride = layout_trees
    layout = Layout(Shape(shape), Stride(stride))
    indices = [layout(i) for i in range(layout.size)]
    assert indices == [ref_index(i, shape, stride) for i in range(layout.size)]
    assert layout.is_injective == (len(set(indices)) == len(indices))
    assert layout.cosize == 1 + max(indices)
    canonical = Layout.canonical(Shape(shape))
    assert sorted(canonical(i) for i in range(layout.size)) == list(range(layout.size))
    assert [m.size for m in layout] == [math.prod(ref_leaves(m)) if not isinstance(m, int) else m for m in shape]


@SETTINGS
@given(top_levels(small_extent), top_levels(small_stride))
def test_non_congruent_trees_raise_value_error(shape, stride):
    congruent = ref_profile(shape) == ref_profile(stride)
    try:
        Layout(Shape(shape), Stride(stride))
    except ValueError as e:
        assert not congruent and "not congruent" in str(e)
        return
    assert congruent


@SETTINGS
@given(small_layouts(), top_levels(small_extent))
def test_broadcast_to_matches_reference(layout_trees, target):
    shape, stride = layout_trees
    layout = Layout(Shape(shape), Stride(stride))

    def expect(sh, sd, tg):
        if isinstance(sh, int) != isinstance(tg, int):
            raise ValueError
        if isinstance(sh, int):
            if sh == tg:
                return sd
            if sh == 1:
                return 0
            raise ValueError
        if len(sh) != len(tg):
            raise ValueError
        return tuple(expect(a, b, c) for a, b, c in zip(sh, sd, tg))

    try:
        expected = expect(shape, stride, target)
    except ValueError:
        try:
            layout.broadcast_to(Shape(target))
        except ValueError as e:
            assert "cannot broadcast" in str(e)
            return
        raise AssertionError("broadcast accepted")
    b = layout.broadcast_to(Shape(target))
    assert b.stride.top_level == expected
    assert b.shape.top_level == target
