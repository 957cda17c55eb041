"""Shape, Stride and Layout (API.md sections 2 and 10)."""
import copy
import pickle

import pytest

from strideweave import Layout, Shape, Stride

from support.process import snippet_stdout

NOT_IN_DOMAIN = "Key is not in domain of shape"


# ---------------------------------------------------------------- Shape/Stride


class TestShapeConstruction:
    def test_variadic_and_single_iterable_forms_are_equal(self):
        assert Shape(2, [3, 4]) == Shape([2, [3, 4]])
        assert Shape(2, (3, 4)) == Shape((2, (3, 4)))
        assert Stride(1, [2, 6]) == Stride([1, [2, 6]])

    def test_single_int_is_rank_one(self):
        assert Shape(5) == Shape([5])
        assert len(Shape(5)) == 1
        assert Shape(5).top_level == (5,)

    def test_nested_single_element_mode_is_kept(self):
        assert Shape([2, [3]]) != Shape([2, 3])
        assert Shape([2, [3]]).top_level == (2, (3,))
        assert Shape([[2, 3]]).top_level == ((2, 3),)

    def test_rank_zero(self):
        s = Shape()
        assert len(s) == 0
        assert s.top_level == ()
        assert s.size == 1
        assert s == Shape([]) == Shape(())
        assert Stride() == Stride([])

    def test_any_iterable_and_existing_trees(self):
        assert Shape(range(2, 4)) == Shape(2, 3)
        assert Shape(x for x in (2, 3)) == Shape(2, 3)
        assert Shape(Shape(2, [3, 4])) == Shape(2, [3, 4])
        assert Shape(2, Shape(3, 4)) == Shape(2, [3, 4])
        assert Shape(Stride(2, 3)) == Shape(2, 3)

    def test_numpy_integers_are_ints(self):
        np = pytest.importorskip("numpy")
        assert Shape(np.int64(3), np.array([2, 3])) == Shape(3, [2, 3])

    @pytest.mark.parametrize("items", [(0,), (-1,), (2, 0), (2, [3, -4]), ([[0]],)])
    def test_extent_below_one(self, items):
        with pytest.raises(ValueError, match="extent must be >= 1"):
            Shape(*items)

    def test_negative_stride(self):
        with pytest.raises(ValueError, match="Stride must be >= 0"):
            Stride(1, -2)
        with pytest.raises(ValueError, match="Stride must be >= 0"):
            Stride([1, [2, -6]])
        assert Stride(0, 0).top_level == (0, 0)

    def test_stride_zero_is_not_a_valid_extent(self):
        with pytest.raises(ValueError, match="extent must be >= 1"):
            Shape(Stride(0, 1))

    @pytest.mark.parametrize("bad", [2.5, None, "23", b"2", bytearray(b"2"), object(), 1j])
    def test_element_neither_int_nor_iterable(self, bad):
        with pytest.raises(ValueError, match="must be an int or an iterable"):
            Shape(2, bad)
        with pytest.raises(ValueError, match="must be an int or an iterable"):
            Stride([1, [bad]])

    def test_lone_non_iterable_argument(self):
        with pytest.raises(ValueError, match="got float"):
            Shape(2.5)
        with pytest.raises(ValueError, match="got str"):
            Shape("23")

    def test_bool_is_not_an_int(self):
        with pytest.raises(ValueError, match="got bool"):
            Shape(True)
        with pytest.raises(ValueError, match="got bool"):
            Stride([1, [False]])

    def test_keywords_rejected(self):
        with pytest.raises(TypeError, match="keyword"):
            Shape(extent=2)

    def test_int64_limits(self):
        with pytest.raises(ValueError, match="does not fit a signed 64-bit"):
            Shape(2**63)
        with pytest.raises(ValueError, match="does not fit a signed 64-bit"):
            Stride(2**64)
        with pytest.raises(ValueError, match="overflows int64"):
            Shape(2**32, [2**32])
        assert Shape(2**62, 1).size == 2**62
        assert Stride(2**63 - 1).top_level == (2**63 - 1,)

    def test_self_referential_list(self):
        a = [2]
        a.append(a)
        with pytest.raises(ValueError, match="nesting is deeper"):
            Shape(a)

    def test_iterator_errors_propagate(self):
        def gen():
            yield 2
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            Shape(gen())


class TestShapeMembers:
    def test_top_level_len_depth_size(self):
        s = Shape([2, [3, 4]])
        assert s.top_level == (2, (3, 4))
        assert len(s) == 2
        assert s.depth == 2
        assert s.size == 24
        assert Shape([2, 3]).depth == 1
        assert Shape([[2, [3]], 4]).depth == 3
        assert Shape().depth == 1

    def test_getitem_leaf_and_nested(self):
        s = Shape([2, [3, 4]])
        assert s[0] == 2 and type(s[0]) is int
        assert s[1] == Shape(3, 4)
        assert s[-1] == Shape(3, 4)
        assert s[-2] == 2
        d = Stride([1, [2, 6]])
        assert d[1] == Stride(2, 6) and type(d[1]) is Stride

    def test_getitem_out_of_range(self):
        s = Shape([2, [3, 4]])
        for i in (2, -3, 10**30):
            with pytest.raises(IndexError, match="out of range"):
                s[i]
        with pytest.raises(TypeError, match="integers or slices"):
            s["a"]

    def test_slices(self):
        s = Shape(2, [3, 4], 5)
        assert s[0:2] == Shape(2, [3, 4])
        assert s[1:] == Shape([[3, 4], 5])
        assert s[::-1] == Shape(5, [3, 4], 2)
        assert s[5:] == Shape()
        assert type(Stride(1, 2)[0:1]) is Stride

    def test_iteration(self):
        assert list(Shape(2, [3, 4])) == [2, Shape(3, 4)]

    def test_repr(self):
        assert repr(Shape(2, [3, 4])) == "Shape<(2, (3, 4))>"
        assert repr(Stride(1, [2, 6])) == "Stride<(1, (2, 6))>"
        assert repr(Shape(5)) == "Shape<(5,)>"
        assert repr(Shape()) == "Shape<()>"

    def test_stride_has_no_size(self):
        assert not hasattr(Stride(1, 2), "size")

    def test_structural_equality(self):
        assert Shape(2, [3, 4]) == Shape(2, [3, 4])
        assert Shape(2, [3, 4]) != Shape(2, [4, 3])
        assert Shape(2, 3) != Stride(2, 3)
        assert Shape(2, 3) != (2, 3)

    def test_unhashable(self):
        assert Shape.__hash__ is None and Stride.__hash__ is None
        with pytest.raises(TypeError, match="unhashable"):
            hash(Shape(2))
        with pytest.raises(TypeError, match="unhashable"):
            {Stride(1)}

    @pytest.mark.parametrize("cls,args", [(Shape, (2, 3)), (Stride, (1, 2))])
    @pytest.mark.parametrize("name", ["top_level", "depth", "size", "new_attr", "__class__"])
    def test_immutable(self, cls, args, name):
        obj = cls(*args)
        with pytest.raises(AttributeError, match="immutable"):
            setattr(obj, name, 1)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(obj, name)
        assert obj == cls(*args)

    def test_pickle_and_copy(self):
        for obj in (Shape(2, [3, [4]]), Stride(1, [0, 6]), Shape()):
            assert pickle.loads(pickle.dumps(obj)) == obj
            assert copy.deepcopy(obj) == obj


# ---------------------------------------------------------------- Layout


def example():
    return Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]]))


class TestLayoutConstruction:
    def test_positional_and_keyword(self):
        s, d = Shape(2, 3), Stride(1, 2)
        assert Layout(s, d) == Layout(shape=s, stride=d) == Layout(s, stride=d)

    def test_identity_of_shape_and_stride(self):
        s, d = Shape(2, [3, 4]), Stride(1, [2, 6])
        layout = Layout(s, d)
        assert layout.shape is s
        assert layout.stride is d

    @pytest.mark.parametrize(
        "shape,stride,fragment",
        [
            ((2, 3), Stride(1, 2), "must be a Shape"),
            (Stride(2, 3), Stride(1, 2), "must be a Shape, got strideweave.Stride"),
            (Shape(2, 3), (1, 2), "must be a Stride"),
            (Shape(2, 3), Shape(1, 2), "must be a Stride, got strideweave.Shape"),
        ],
    )
    def test_non_shape_or_stride(self, shape, stride, fragment):
        with pytest.raises(ValueError, match=fragment):
            Layout(shape, stride)

    @pytest.mark.parametrize(
        "shape,stride,fragment",
        [
            (Shape(2, [3]), Stride(1, 2), "mode 1: shape has a nested mode but stride has a leaf"),
            (Shape(2, 3), Stride(1, [2]), "mode 1: shape has a leaf but stride has a nested mode"),
            (Shape(2, 3), Stride(1), "top level: shape has 2 modes but stride has 1"),
            (Shape(2, [3, 4]), Stride(1, [2, 6, 7]), "mode 1: shape has 2 modes but stride has 3"),
        ],
    )
    def test_not_congruent_names_the_mismatch(self, shape, stride, fragment):
        with pytest.raises(ValueError, match="not congruent") as ei:
            Layout(shape, stride)
        assert fragment in str(ei.value)

    def test_missing_arguments(self):
        with pytest.raises(TypeError):
            Layout(Shape(2))

    def test_cosize_overflow_rejected(self):
        with pytest.raises(ValueError, match="cosize overflows int64"):
            Layout(Shape(2**62), Stride(4))
        with pytest.raises(ValueError, match="cosize overflows int64"):
            Layout(Shape(2, 2), Stride(2**62, 2**62))
        assert Layout(Shape(2), Stride(2**63 - 2)).cosize == 2**63 - 1


class TestLayoutMembers:
    def test_size_cosize(self):
        a = Layout(Shape([2, 3]), Stride([1, 4]))
        assert (a.size, a.cosize) == (6, 10)
        assert a.is_injective is True
        b = Layout(Shape([2, 3]), Stride([1, 0]))
        assert (b.size, b.cosize) == (6, 2)
        assert b.is_injective is False
        e = example()
        assert (e.size, e.cosize) == (24, 24)

    def test_cosize_at_least_one(self):
        assert Layout(Shape(1, 1), Stride(5, 7)).cosize == 1
        assert Layout(Shape(4), Stride(0)).cosize == 1

    def test_rank_zero(self):
        r = Layout(Shape(), Stride())
        assert (r.size, r.cosize, r.leaves(), len(r)) == (1, 1, [], 0)
        assert r.index(()) == 0 and r([]) == 0 and r(0) == 0
        assert r.is_injective
        with pytest.raises(ValueError, match=NOT_IN_DOMAIN):
            r(1)
        with pytest.raises(ValueError, match=NOT_IN_DOMAIN):
            r((0,))

    def test_leaves_depth_first(self):
        assert example().leaves() == [(2, 1), (3, 2), (4, 6)]
        layout = Layout(Shape([[2, [3]], 4]), Stride([[5, [7]], 0]))
        assert layout.leaves() == [(2, 5), (3, 7), (4, 0)]

    def test_modes_len_getitem_iter(self):
        e = example()
        assert len(e) == 2
        assert e[0] == Layout(Shape(2), Stride(1))
        assert e[1] == Layout(Shape(3, 4), Stride(2, 6))
        assert e[-1] == e[1]
        assert list(e) == [e[0], e[1]]
        assert e[0:2] == e
        assert e[1:] == Layout(Shape([[3, 4]]), Stride([[2, 6]]))
        with pytest.raises(IndexError, match="out of range"):
            e[2]
        with pytest.raises(TypeError, match="integers or slices"):
            e[(0,)]

    def test_repr(self):
        assert repr(Layout(Shape(2, 3), Stride(1, 2))) == "Layout<Shape<(2, 3)>, Stride<(1, 2)>>"

    def test_equality(self):
        assert example() == example()
        assert example() != Layout(Shape([2, [3, 4]]), Stride([1, [2, 7]]))
        assert example() != Layout(Shape([2, 3, 4]), Stride([1, 2, 6]))
        assert example() != (Shape([2, [3, 4]]), Stride([1, [2, 6]]))

    def test_unhashable(self):
        assert Layout.__hash__ is None
        with pytest.raises(TypeError, match="unhashable"):
            hash(example())

    @pytest.mark.parametrize("name", ["shape", "stride", "size", "cosize", "is_injective", "new_attr"])
    def test_immutable(self, name):
        layout = example()
        with pytest.raises(AttributeError, match="immutable"):
            setattr(layout, name, 1)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(layout, name)
        assert layout == example()

    def test_pickle(self):
        e = example()
        assert pickle.loads(pickle.dumps(e)) == e
        assert copy.copy(e) == e


class TestIndex:
    def test_documented_example(self):
        e = example()
        assert e.index([1, [2, 3]]) == 23
        assert e.index((1, 11)) == 23
        assert e.index(23) == 23
        assert e([1, [2, 3]]) == e((1, 11)) == e(23) == 23

    def test_colexicographic_order(self):
        row_major = Layout(Shape(2, 3), Stride(3, 1))
        assert [row_major(i) for i in range(6)] == [0, 3, 1, 4, 2, 5]
        assert row_major((1, 2)) == 5
        nested = Layout(Shape(2, [3, 2]), Stride(10, [1, 100]))
        assert [nested(i) for i in range(12)] == [0, 10, 1, 11, 2, 12, 100, 110, 101, 111, 102, 112]
        assert nested((1, [2, 1])) == 112
        assert nested((1, 5)) == 112

    def test_all_key_forms_agree(self):
        e = example()
        for ordinal in range(e.size):
            i0, rest = ordinal % 2, ordinal // 2
            assert e(ordinal) == e((i0, rest)) == e([i0, [rest % 3, rest // 3]])

    def test_broadcast_layout_indices(self):
        b = Layout(Shape(2, 3), Stride(1, 0))
        assert [b(i) for i in range(6)] == [0, 1, 0, 1, 0, 1]

    @pytest.mark.parametrize(
        "key",
        [-1, 24, 2**70, -(2**70), (2, 0), (-1, 0), (0, 12), (0, [3, 0]), (0, [0, 4]), (0,), (0, 0, 0),
         [0, [0]], [0, [0, 0, 0]], ([0], 0), (), [[0, 0], 0]],
    )
    def test_not_in_domain(self, key):
        with pytest.raises(ValueError, match=NOT_IN_DOMAIN):
            example().index(key)
        with pytest.raises(ValueError, match=NOT_IN_DOMAIN):
            example()(key)

    @pytest.mark.parametrize(
        "key", [True, False, (True, 0), (0, False), (0, [True, 0]), 1.0, (0, 1.0), "0", None, (0, None),
                (0, {0: 1}), {0, 1}, Shape(1, 2)],
    )
    def test_bad_part_types(self, key):
        with pytest.raises(TypeError, match="int or a tuple/list"):
            example().index(key)

    def test_int_subclass_accepted(self):
        import enum

        class I(enum.IntEnum):
            ONE = 1

        assert example().index(I.ONE) == 1
        assert example().index((I.ONE, [I.ONE, 0])) == 3

    def test_call_arity(self):
        with pytest.raises(TypeError):
            example()()
        with pytest.raises(TypeError):
            example()(0, 1)
        with pytest.raises(TypeError, match="keyword"):
            example()(key=0)


class TestInjectivity:
    def test_gapped_injective(self):
        assert Layout(Shape(2, 3), Stride(1, 4)).is_injective
        assert Layout(Shape(2, [3, 2]), Stride(10, [1, 100])).is_injective

    def test_overlapping_strides_still_injective(self):
        # indices {0,2,4} + {0,3}: no sorted-stride chain, yet distinct.
        assert Layout(Shape(3, 2), Stride(2, 3)).is_injective

    def test_collisions(self):
        assert not Layout(Shape(2, 2), Stride(1, 1)).is_injective
        assert not Layout(Shape(3, 2), Stride(2, 4)).is_injective
        assert not Layout(Shape(2, 3), Stride(1, 0)).is_injective

    def test_extent_one_stride_zero_is_fine(self):
        assert Layout(Shape(1, 3), Stride(0, 1)).is_injective

    def test_huge_layouts_are_fast(self):
        big = 2**30
        assert Layout(Shape(big, big), Stride(big, 1)).is_injective
        assert not Layout(Shape(big, big), Stride(2, 3)).is_injective
        assert Layout(Shape(big, 2), Stride(2, 2 * big - 3)).is_injective
        assert not Layout(Shape(big, 2), Stride(1, big - 1)).is_injective
        assert Layout(Shape(3, 2, 2**40), Stride(2, 3, 6)).is_injective


class TestCanonicalAndBroadcast:
    def test_canonical(self):
        assert Layout.canonical(Shape(4, 2)).stride == Stride(1, 4)
        assert Layout.canonical(Shape(2, [4, 3])).stride == Stride(1, [2, 8])
        c = Layout.canonical(Shape(2, [4, 3]))
        assert c.is_injective and c.cosize == c.size == 24
        assert Layout.canonical(Shape()).stride == Stride()

    def test_canonical_keeps_shape_object(self):
        s = Shape(2, 3)
        assert Layout.canonical(s).shape is s

    def test_canonical_rejects_non_shape(self):
        with pytest.raises(TypeError, match="expects a Shape"):
            Layout.canonical((4, 2))
        with pytest.raises(TypeError, match="expects a Shape"):
            Layout.canonical(Stride(4, 2))

    def test_canonical_large(self):
        # Shape already rejects sizes beyond int64, so canonical never overflows.
        c = Layout.canonical(Shape(2**31, [2**31, 1]))
        assert c.stride == Stride(1, [2**31, 2**62]) and c.cosize == 2**62

    def test_broadcast_to(self):
        src = Layout(Shape(1, [3, 1]), Stride(5, [1, 7]))
        target = Shape(4, [3, 2])
        b = src.broadcast_to(target)
        assert b.shape is target
        assert b.stride == Stride(0, [1, 0])
        assert b.cosize == 3 and not b.is_injective
        assert src.broadcast_to(src.shape) == src

    def test_broadcast_to_errors(self):
        src = Layout(Shape(1, [3, 1]), Stride(5, [1, 7]))
        with pytest.raises(TypeError, match="expects a Shape"):
            src.broadcast_to((4, (3, 2)))
        with pytest.raises(TypeError, match="expects a Shape"):
            src.broadcast_to(Stride(4, [3, 2]))
        with pytest.raises(ValueError, match="cannot broadcast: mode 1 is nested"):
            src.broadcast_to(Shape(4, 3))
        with pytest.raises(ValueError, match="mode 1.0 has extent 3, target extent 5"):
            src.broadcast_to(Shape(4, [5, 2]))
        with pytest.raises(ValueError, match="2 modes in the layout but 3"):
            src.broadcast_to(Shape(4, [3, 2, 1]))


# ------------------------------------------------------------ nested Shape objects


def test_nested_shape_objects_respect_depth_limit():
    # Nested lists stop at 64 levels; wrapping Shape objects used to stack
    # them without limit until the recursive tree code overflowed the C stack.
    x = 1
    for _ in range(63):
        x = [x]
    deepest = Shape([x])
    assert deepest.depth == 64
    assert Shape(deepest) == deepest and Shape([x, 2]).depth == 64
    for wrap in (lambda s: Shape([s]), lambda s: Shape(2, s), lambda s: Stride([s])):
        with pytest.raises(ValueError, match="deeper than 64 levels"):
            wrap(deepest)


def test_nested_shape_objects_cannot_overflow_the_stack():
    snippet_stdout("""
        from strideweave import Shape
        s = Shape(1)
        try:
            for _ in range(1000):
                x = s
                for _ in range(60):
                    x = [x]
                s = Shape(x)
        except ValueError as e:
            print(e)
    """, dev=True)
