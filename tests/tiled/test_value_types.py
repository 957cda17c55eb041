"""TileSelection, TileSet, ResidencyPlan, ResidencyPolicy, TileState: the
immutable value types of the tiled spec, their ordering and error rules."""
import dataclasses

import pytest

import strideweave as sw
import strideweave.carriers.tiled_evictable as te_mod
from strideweave.carriers.tiled_evictable import (
    ResidencyPlan, ResidencyPolicy, TiledEvictable, TileSelection, TileSet, TileState,
)

from support.tiled import pending

NAMES = ["TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan", "ResidencyPolicy", "TileState",
         "AwaitProjection", "AwaitResidency"]


@pytest.mark.parametrize("name", NAMES)
def test_names_are_the_same_object_on_both_paths(name):
    assert getattr(sw, name) is getattr(te_mod, name)


# ------------------------------------------------------------------ TileSelection

def test_selection_keeps_router_order():
    s = TileSelection([[2, 7, 19]])
    assert s.per_axis == ((2, 7, 19),)
    assert s.coordinates == ((2,), (7,), (19,))
    assert s.rank == 1
    assert s.compact_grid_shape == (3,)


def test_selection_enumerates_first_mode_fastest():
    s = TileSelection([[7, 2], [4, 9]])
    assert s.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))
    assert s.compact_grid_shape == (2, 2)
    # compact coordinate c -> per_axis[i][c[i]], c enumerated first-mode-fastest
    for j, coord in enumerate(s.coordinates):
        c = (j % 2, j // 2)
        assert coord == tuple(s.per_axis[i][c[i]] for i in range(2))


def test_selection_includes_every_recombined_corner():
    s = TileSelection([[0, 1], [0, 1]])
    assert (1, 1) in s.coordinates
    assert len(s.coordinates) == 4


def test_selection_accepts_iterables_and_index_objects():
    np = pytest.importorskip("numpy")
    s = TileSelection(iter([range(3), (np.int64(5),)]))
    assert s.per_axis == ((0, 1, 2), (5,))
    assert all(type(x) is int for x in s.per_axis[1])


def test_selection_is_immutable_and_decoupled_from_inputs():
    axis = [3, 1]
    s = TileSelection([axis])
    axis.append(9)
    assert s.per_axis == ((3, 1),)
    with pytest.raises(AttributeError, match="immutable"):
        s.per_axis = ((0,),)
    with pytest.raises(AttributeError, match="immutable"):
        s.extra = 1


def test_selection_tile_set_holds_its_coordinates():
    s = TileSelection([[7, 2], [4, 9]])
    ts = s.tile_set
    assert isinstance(ts, TileSet)
    assert set(ts.coordinates) == set(s.coordinates)


@pytest.mark.parametrize("bad, fragment", [
    (5, "finite iterable"),
    ([5], "finite iterable"),
    ([[1.0]], "integer"),
    ([[True]], "integer"),
    (["ab"], "iterable"),
])
def test_selection_type_errors(bad, fragment):
    with pytest.raises(TypeError, match=fragment):
        TileSelection(bad)


@pytest.mark.parametrize("bad, fragment", [
    ([], "at least one axis"),
    ([[1], []], "empty"),
    ([[1, 1]], "duplicate"),
    ([[-1]], "negative"),
])
def test_selection_value_errors(bad, fragment):
    with pytest.raises(ValueError, match=fragment):
        TileSelection(bad)


def test_selection_binding_rejects_rank_and_range():
    te = sw.TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 3), (1, 1))
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(ValueError, match="rank"):
        te.project(t, TileSelection([[0]]))
    with pytest.raises(ValueError, match="out of range"):
        te.project(t, TileSelection([[0], [3]]))


def test_selection_has_no_index_map_surface():
    for name in ("Product", "Permutation", "from_coordinates", "sparse"):
        assert not hasattr(TileSelection, name)


# ------------------------------------------------------------------ TileSet

def test_tile_set_sorts_first_axis_fastest():
    ts = TileSet([(1, 1), (0, 1), (1, 0), (0, 0)])
    assert ts.coordinates == ((0, 0), (1, 0), (0, 1), (1, 1))


def test_tile_set_represents_non_product_sets():
    ts = TileSet([(0, 0), (0, 1), (1, 0)])
    assert len(ts) == 3 and (1, 1) not in ts


def test_empty_tile_set_is_rank_agnostic():
    assert TileSet().coordinates == ()
    assert TileSet().rank is None
    assert TileSet() == TileSet([])


@pytest.mark.parametrize("bad, fragment", [(3, "finite iterable"), ([3], "finite iterable"),
                                           ([(0, 1.5)], "integer"), ([(False,)], "integer")])
def test_tile_set_type_errors(bad, fragment):
    with pytest.raises(TypeError, match=fragment):
        TileSet(bad)


@pytest.mark.parametrize("bad, fragment", [([(0,), (0, 1)], "mixed ranks"), ([(0, -1)], "negative"),
                                           ([(1, 2), (1, 2)], "duplicate")])
def test_tile_set_value_errors(bad, fragment):
    with pytest.raises(ValueError, match=fragment):
        TileSet(bad)


def test_tile_set_binding_rejects_rank_and_range():
    te = sw.TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 3), (1, 1))
    with pytest.raises(ValueError, match="rank"):
        te.promote_async(TileSet([(0,)]))
    with pytest.raises(ValueError, match="out of range"):
        te.promote_async(TileSet([(2, 0)]))


def test_tile_set_is_immutable_and_hashable():
    ts = TileSet([(0, 1)])
    with pytest.raises(AttributeError, match="immutable"):
        ts.coordinates = ()
    assert hash(ts) == hash(TileSet([(0, 1)]))


# ------------------------------------------------------------------ ResidencyPlan

def test_plan_defaults_to_empty_sets():
    p = ResidencyPlan()
    assert p.promote == TileSet() and p.retain == TileSet() and p.evict == TileSet()
    p2 = ResidencyPlan(promote=TileSet([(0, 0)]), evict=None)
    assert p2.promote.coordinates == ((0, 0),)


@pytest.mark.parametrize("field", ["promote", "retain", "evict"])
def test_plan_rejects_non_tile_sets(field):
    with pytest.raises(TypeError, match="TileSet"):
        ResidencyPlan(**{field: [(0, 0)]})
    with pytest.raises(TypeError, match="TileSet"):
        ResidencyPlan(**{field: TileSelection([[0], [0]])})


def test_plan_rejects_a_tile_in_two_fields():
    with pytest.raises(ValueError, match="both promote and evict"):
        ResidencyPlan(promote=TileSet([(0, 0)]), evict=TileSet([(0, 0), (1, 0)]))


def test_plan_is_immutable():
    with pytest.raises(AttributeError, match="immutable"):
        ResidencyPlan().promote = TileSet()


# ------------------------------------------------------------------ ResidencyPolicy, TileState

def test_residency_policy_is_a_runtime_checkable_protocol():
    class Good:
        def plan(self, required, purpose):
            return ResidencyPlan()

    class Bad:
        pass

    assert isinstance(Good(), ResidencyPolicy)
    assert not isinstance(Bad(), ResidencyPolicy)


def test_tile_state_is_frozen():
    s = TileState(location="primary", valid=True, dirty=False)
    assert dataclasses.is_dataclass(s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.dirty = True


# ------------------------------------------------------------------ inputs read once, frozen fields

class OneShot:
    """An iterable that may be iterated once (a second iter() fails the test)."""

    def __init__(self, items):
        self.items, self.iterated = list(items), 0

    def __iter__(self):
        self.iterated += 1
        assert self.iterated == 1, "iterated twice"
        return iter(self.items)


def test_selection_iterates_each_input_once():
    axes = [OneShot([2, 0]), OneShot([1])]
    outer = OneShot(axes)
    s = TileSelection(outer)
    assert s.per_axis == ((2, 0), (1,))
    assert outer.iterated == 1 and all(a.iterated == 1 for a in axes)
    gen = TileSelection(x for x in ([0, 1], (k for k in [3])))
    assert gen.per_axis == ((0, 1), (3,))


def test_tile_set_iterates_each_input_once():
    coords = [OneShot([1, 0]), OneShot([0, 2])]
    outer = OneShot(coords)
    ts = TileSet(outer)
    assert ts.coordinates == ((1, 0), (0, 2))
    assert outer.iterated == 1 and all(c.iterated == 1 for c in coords)
    assert TileSet((i, j) for i in range(2) for j in range(1)).coordinates == ((0, 0), (1, 0))


@pytest.mark.parametrize("make,field", [
    (lambda: TileSelection([[0], [1]]), "per_axis"),
    (lambda: TileSet([(0, 1)]), "coordinates"),
    (lambda: ResidencyPlan(), "retain"),
    (lambda: TileState("primary", True, False), "location"),
])
def test_assigning_or_deleting_a_field_raises_frozen_instance_error(make, field):
    v = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(v, field, getattr(v, field))
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(v, field)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.other = 1


# ------------------------------------------------------------ equality, hashing, ordering and the remaining error cases


def test_selection_compact_coordinate_maps_through_per_axis_for_three_axes():
    s = TileSelection([[5, 1], [3], [0, 4, 2]])
    assert s.rank == 3 and s.compact_grid_shape == (2, 1, 3)
    assert len(s.coordinates) == 6
    # first-mode-fastest over compact_grid_shape, i.e. Shape.encode order
    shape = sw.Shape([2, 1, 3])
    for j, coord in enumerate(s.coordinates):
        c = shape.decode(j)
        assert coord == tuple(s.per_axis[i][c[i]] for i in range(3))


def test_selection_per_axis_and_coordinates_are_tuples_of_int_tuples():
    s = TileSelection([[2, 7, 19]])
    assert type(s.per_axis) is tuple and all(type(a) is tuple for a in s.per_axis)
    assert type(s.coordinates) is tuple and all(type(c) is tuple for c in s.coordinates)
    assert type(s.rank) is int and type(s.compact_grid_shape) is tuple


def test_selection_equality_and_hash_follow_the_ordered_per_axis():
    a = TileSelection([[1, 2], [0]])
    assert a == TileSelection(((1, 2), (0,)))
    assert hash(a) == hash(TileSelection(iter([iter([1, 2]), [0]])))
    assert a != TileSelection([[2, 1], [0]])  # order is part of the selection
    assert len({a, TileSelection([[1, 2], [0]]), TileSelection([[2, 1], [0]])}) == 2


def test_selection_tile_set_is_the_unique_coordinates_as_a_tile_set():
    s = TileSelection([[7, 2], [4, 9]])
    assert s.tile_set == TileSet(s.coordinates)
    assert s.tile_set.coordinates == ((2, 4), (7, 4), (2, 9), (7, 9))


def test_selection_generator_input_is_materialised_once():
    def gen():
        yield (x for x in (3, 1))
        yield [0]
    s = TileSelection(gen())
    assert s.per_axis == ((3, 1), (0,))


def test_selection_of_strings_is_a_type_error():
    with pytest.raises(TypeError, match="iterable"):
        TileSelection("ab")
    with pytest.raises(TypeError, match="integer"):
        TileSelection([[0, None]])


def test_selection_binding_through_residency_requests():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (2, 3), (1, 1))
    with pytest.raises(ValueError, match="rank"):
        te.promote_async(TileSelection([[0]]))
    with pytest.raises(ValueError, match="out of range"):
        te.evict_async(TileSelection([[0, 2], [0]]))


def test_tile_set_orders_by_reversed_tuple_for_rank_three():
    coords = [(1, 0, 1), (0, 1, 0), (1, 1, 0), (0, 0, 1), (2, 0, 0)]
    assert TileSet(coords).coordinates == tuple(sorted(coords, key=lambda c: c[::-1]))
    assert TileSet(coords).coordinates[0] == (2, 0, 0)


def test_tile_set_equality_ignores_input_order_and_hash_agrees():
    a = TileSet([(1, 0), (0, 0), (0, 1)])
    b = TileSet(iter([(0, 1), (1, 0), (0, 0)]))
    assert a == b and hash(a) == hash(b)
    assert a != TileSet([(1, 0), (0, 0)])
    assert TileSet() != TileSelection([[0]])


def test_tile_set_is_decoupled_from_its_input():
    src = [[0, 1], [1, 1]]
    ts = TileSet(src)
    src[0][0] = 9
    src.append([2, 2])
    assert ts.coordinates == ((0, 1), (1, 1))
    with pytest.raises(AttributeError, match="immutable"):
        ts.extra = 1
    with pytest.raises(AttributeError, match="immutable"):
        del ts.coordinates


def test_tile_set_entry_errors():
    with pytest.raises(TypeError, match="iterable"):
        TileSet([(0,), 5])
    with pytest.raises(TypeError, match="integer"):
        TileSet([(0, "1")])
    with pytest.raises(ValueError, match="negative"):
        TileSet([(0, 0), (-1, 0)])


def test_an_empty_tile_set_binds_to_any_grid_and_is_a_no_op():
    te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,))
    assert te.promote(TileSet()) is None
    assert te.evict(TileSet()) is None
    h = te.evict_async(TileSet([]))
    assert h.done and h.wait() is None
    assert te.tile_state((0,)) == TileState("primary", True, True)


@pytest.mark.parametrize("a, b", [("promote", "retain"), ("retain", "evict"), ("promote", "evict")])
def test_plan_rejects_a_tile_in_any_two_fields(a, b):
    with pytest.raises(ValueError, match=f"{a} and {b}"):
        ResidencyPlan(**{a: TileSet([(0, 1)]), b: TileSet([(0, 1)])})


def test_plan_fields_are_the_given_tile_sets_and_plans_compare_by_value():
    p, r, e = TileSet([(0,)]), TileSet([(1,)]), TileSet([(2,)])
    plan = ResidencyPlan(p, r, e)
    assert plan.promote is p and plan.retain is r and plan.evict is e
    assert plan == ResidencyPlan(promote=TileSet([(0,)]), retain=TileSet([(1,)]), evict=TileSet([(2,)]))
    assert hash(plan) == hash(ResidencyPlan(promote=TileSet([(0,)]), retain=TileSet([(1,)]), evict=TileSet([(2,)])))
    assert plan != ResidencyPlan(promote=TileSet([(0,)]))
    for name in ("promote", "retain", "evict"):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(plan, name, TileSet())


def test_a_plan_of_the_wrong_rank_is_a_value_error_before_work():
    class P:
        def plan(self, required, purpose):
            return ResidencyPlan(promote=TileSet([(0, 0)]))

    te = TiledEvictable(sw.CPU(0), sw.CPU(8), (4,), (2,), residency_policy=P())
    t = sw.Tensor(te, 0, te.canonical_layout())
    with pytest.raises(ValueError, match="rank"):
        te.project(t, TileSelection([[1]]))
    assert pending(te) == 0 and te.tile_state((0,)).location == "secondary"


def test_a_policy_whose_plan_is_not_callable_or_a_class_is_refused():
    class NotCallable:
        plan = 5

    class Good:
        def plan(self, required, purpose):
            return ResidencyPlan()

    for bad in (NotCallable(), Good, 3, "plan"):
        p = sw.CPU(4)
        with pytest.raises(TypeError, match="ResidencyPolicy"):
            TiledEvictable(p, sw.CPU(0), (2,), (2,), residency_policy=bad)
        assert not p.is_owned()  # no instance exposed, nothing claimed
    te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,), residency_policy=Good())
    assert isinstance(te.residency_policy, ResidencyPolicy)


def test_the_policy_is_immutable_after_construction_and_defaults_to_none():
    te = TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,))
    assert te.residency_policy is None
    with pytest.raises(AttributeError):
        te.residency_policy = None


def test_tile_state_fields_and_equality():
    s = TileState(location="secondary", valid=True, dirty=False)
    assert (s.location, s.valid, s.dirty) == ("secondary", True, False)
    assert s == TileState("secondary", True, False) and hash(s) == hash(TileState("secondary", True, False))
    assert s != TileState("secondary", True, True)


def test_tile_state_valid_follows_the_location():
    te = TiledEvictable(sw.CPU(0), sw.CPU(0), (3,), (2,))
    t = sw.Tensor(te, 0, te.canonical_layout())
    sel = TileSelection([[1]])
    compact = sw.Tensor(sw.CPU(2), 0, sw.Layout(sw.Shape([[2, 1]]), sw.Stride([[1, 2]])))
    full = te.scatter(compact, t, sel).wait()
    out = full.carrier
    assert out.tile_state((0,)) == TileState("invalid", False, False)
    assert out.tile_state((1,)) == TileState("primary", True, True)
    assert te.tile_state((0,)) == TileState("implicit", True, False)
