"""The package types precisely for a type checker: the stub beside the
extension (strideweave/_core.pyi) gives every re-exporting submodule real
types, not Any. Each assignment below is wrong on purpose; an Any-typed name
would be accepted silently, so the test counts mypy's errors."""
import re

import pytest

from support.process import REPO
from support.typecheck import run_mypy_strict

api = pytest.importorskip("mypy.api")

SNIPPET = """\
import strideweave as sw
from strideweave import core
from strideweave.carriers import extension, move, tiled_evictable
a: int = move.move
b: int = extension.TransferRoute
c: int = core.Subtensor
d: int = tiled_evictable.AwaitProjection
e: int = sw.Layout.canonical
f: int = sw.__version__
g: int = sw.profile
for mode in sw.Layout.canonical(sw.Shape(2, 3)):
    reveal_type(mode)
reveal_type(sw.move_async(sw.Tensor(sw.CPU(1), 0, sw.Layout.canonical(sw.Shape(1))), sw.CPU(1)).wait())
"""


def test_submodules_are_precisely_typed(tmp_path):
    lines, err = run_mypy_strict(SNIPPET, tmp_path)
    out = "\n".join(lines)
    wrong = sorted(int(m.group(1)) for m in (re.search(r":(\d+): error: Incompatible types in assignment", x)
                                             for x in lines) if m)
    assert wrong == [4, 5, 6, 7, 8, 9, 10], out + err
    revealed = [x.split("Revealed type is ")[1] for x in lines if "Revealed type is" in x]
    assert revealed == ['"strideweave._core.Layout"', '"strideweave._core.Tensor"'], out + err
    others = [x for x in lines if ": error:" in x and "Incompatible types in assignment" not in x]
    assert others == [], out + err


def test_stubtest_config_is_strict():
    """tools/stubtest/mypy.ini holds the stubs and modules to --strict under
    stubtest, which ignores `strict = True` (it parses the config with a no-op
    for the strict flag set): every flag --strict sets must be spelled out."""
    import io

    from mypy.config_parser import parse_config_file
    from mypy.main import define_options
    from mypy.options import Options

    ini = REPO / "tools" / "stubtest" / "mypy.ini"
    options = Options()
    out, err = io.StringIO(), io.StringIO()
    parse_config_file(options, lambda: None, str(ini), out, err)  # as mypy.stubtest does
    assert out.getvalue() == "" and err.getvalue() == ""
    strict_assignments = define_options()[2]
    assert strict_assignments, "mypy no longer reports the --strict flag set"
    missing = [(dest, value) for dest, value in strict_assignments if getattr(options, dest) != value]
    assert missing == []
