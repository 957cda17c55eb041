"""A user script written the NumPy way type-checks under mypy --strict with
precise types: shape is tuple[int, ...], an int or int-tuple key gives a
value, a slice key a Tensor, item() a value, tolist() a list or a value,
and the constructors, operators and dtype names are typed. The wrong
assignments at the end must be reported (an Any would hide them)."""
import re

import pytest

from support.typecheck import run_mypy_strict

pytest.importorskip("mypy.api")

SCRIPT = """\
import numpy as np
import strideweave as sw

t = sw.zeros((2, 3), dtype=sw.float32)
u = sw.ones(3, dtype=np.float32) + sw.full(3, 2.0) - sw.arange(3, dtype=sw.float32)
e = sw.empty([2, 2])
reveal_type(t.shape)
reveal_type(t.ndim)
reveal_type(len(t))
reveal_type(t[0])
reveal_type(t[1, 2])
reveal_type(t[1, :])
reveal_type(t[..., 0])
reveal_type(t[0:1])
reveal_type(t[None])
reveal_type(t.item())
reveal_type(t.tolist())
for row in t:
    reveal_type(row)
reveal_type(1 - t / 2 + u)
reveal_type(float(t[0, 0:1]))
reveal_type(bool(u[0:1]))
reveal_type(sw.int32)
reveal_type(sw.DType.from_name("float32"))
reveal_type(t.numpy())
a: str = t.shape
b: str = t[0]
c: int = t[1, :]
d: int = sw.arange(4)
"""

# Union members as mypy prints them (item() folds bool into int: bool is an
# int subclass).
VALUE = "float | int | bool"
EXPECTED = [
    "tuple[int, ...]",
    "int",
    "int",
    VALUE,
    VALUE,
    "strideweave._core.Tensor",
    "strideweave._core.Tensor",
    "strideweave._core.Tensor",
    "strideweave._core.Tensor",
    "float | int",
    "list[Any] | float | int",
    "strideweave._core.Tensor",
    "strideweave._core.Tensor",
    "float",
    "bool",
    "strideweave._core.DType",
    "strideweave._core.DType",
    "Any",
]


def test_a_numpy_style_script_has_precise_types(tmp_path):
    lines, err = run_mypy_strict(SCRIPT, tmp_path)
    out = "\n".join(lines)
    # Older mypy versions print builtins with their module.
    revealed = [x.split("Revealed type is ")[1].strip('"').replace("builtins.", "") for x in lines
                if "Revealed type is" in x]
    assert revealed == EXPECTED, out + err
    wrong = sorted(int(m.group(1)) for m in (re.search(r":(\d+): error: Incompatible types in assignment", x)
                                             for x in lines) if m)
    assert wrong == [26, 27, 28, 29], out + err
    others = [x for x in lines if ": error:" in x and "Incompatible types in assignment" not in x]
    assert others == [], out + err
