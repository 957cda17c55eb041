"""Spec audit (tiled-carrier-composition): the value types' rules the
existing tests leave implicit: TileSelection / TileSet / ResidencyPlan
equality, hashing and ordering, the remaining error cases, and the
ResidencyPolicy construction rule."""
import pytest

import strideweave as sw
from support.tiled import pending
from strideweave.carriers.tiled_evictable import (ResidencyPlan, ResidencyPolicy, TiledEvictable, TileSelection,
                                                   TileSet, TileState)


# ------------------------------------------------------------------ TileSelection

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


# ------------------------------------------------------------------ TileSet

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


# ------------------------------------------------------------------ ResidencyPlan

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


# ------------------------------------------------------------------ ResidencyPolicy

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


# ------------------------------------------------------------------ TileState

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
