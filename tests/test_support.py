"""The shared test support (tests/support/) does what the tests rely on: the
one fill rule, both placements, a child interpreter that imports the same
strideweave as this process, and a child's failure reported as one assertion
with its output."""
import json

import pytest

import strideweave as sw

from support.builders import FILL, F32, layout, slots, tensor, values
from support.carriers import ListCarrier, ReleasingListCarrier
from support.process import assert_child_ok, run_python, run_snippet, snippet_stdout


def test_logical_placement_fills_every_unaddressed_slot():
    lay = layout([2, 2], [3, 1])  # slots 0, 3, 1, 4 (+ offset); 2 is a gap
    t = tensor([1.0, 2.0, 3.0, 4.0], lay, offset=1)
    assert values(t) == [1.0, 2.0, 3.0, 4.0]
    assert slots(t.carrier) == [FILL, 1.0, 3.0, FILL, 2.0, 4.0]
    assert t.carrier.version == 6 + 4  # every slot filled, then each value written


def test_slot_placement_and_generic_kind():
    t = tensor([5.0, 6.0], layout([2], [2]), offset=1, kind="generic", placement="slots", size=5)
    assert type(t.carrier) is sw.Generic
    assert slots(t.carrier) == [FILL, 5.0, 6.0, FILL, FILL]
    assert values(t) == [5.0, FILL]


def test_bool_fill_is_false():
    t = tensor([True], layout([1], [1]), offset=1, dtype=sw.DType.Bool)
    assert slots(t.carrier) == [False, True]


def test_list_carriers():
    c = ListCarrier([0.0, 0.0], F32, cast=float)
    c[1] = 3
    assert c.vals == [0.0, 3.0] and type(c.vals[1]) is float
    r = ReleasingListCarrier([1.0])
    r.release()
    assert r.released == 1 and r.vals == [] and r.is_released()


def test_child_imports_the_same_package(tmp_path):
    r = run_python("""
        import json, strideweave
        print(json.dumps(strideweave.__file__))
    """, flags=["-X", "dev"], cwd=tmp_path)
    assert_child_ok(r)
    assert json.loads(r.stdout) == sw.__file__


def test_a_failed_child_is_one_assertion_showing_its_status_and_output():
    r = run_python("""
        print("said on stdout")
        assert 1 == 2, "the child's own assertion"
    """)
    with pytest.raises(AssertionError) as e:
        assert_child_ok(r)
    message = str(e.value)
    assert "child exited with status 1" in message
    assert "said on stdout" in message
    assert "AssertionError: the child's own assertion" in message
    assert assert_child_ok(run_python("print('fine')")).stdout == "fine\n"


def test_a_snippet_runs_in_the_package_folder_under_dev_mode_when_asked():
    out = snippet_stdout("""
        import os, sys, strideweave
        print(os.getcwd() == os.path.dirname(os.path.dirname(strideweave.__file__)), sys.flags.dev_mode)
    """, dev=True)
    assert out.split() == ["True", "True"]
    assert run_snippet("import sys; print(sys.flags.dev_mode)").stdout.strip() == "False"
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        snippet_stdout("1 / 0")
