"""Runs every ```python block of docs/tiled_evictable.md (the expert-routing
example end to end, the row-major geometry with assign/flush, experts in an
existing .npy and safetensors file, the TensorStore secondary, the
profiling example); each block is self-contained and asserts its own
results."""
import re

import pytest
from support.process import REPO

DOC = REPO / "docs" / "tiled_evictable.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)


def test_the_guide_has_the_examples():
    assert len(BLOCKS) >= 2
    assert any("promote_async" in b and "backward" in b and "project" in b for b in BLOCKS)
    assert any('geometry="row-major"' in b and "assign" in b and "flush" in b for b in BLOCKS)
    assert any("TensorStoreCarrier" in b for b in BLOCKS)
    assert any("FileBacked.open" in b and "np.save" in b and "safetensors" in b for b in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_block_runs(index, capsys):
    if "strideweave.carriers.tensorstore" in BLOCKS[index]:
        pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install tensorstore)")
    if "safetensors" in BLOCKS[index]:
        pytest.importorskip("safetensors", reason="the safetensors package (pip install safetensors)")
    code = compile(BLOCKS[index], f"{DOC.name}[python block {index}]", "exec")
    exec(code, {"__name__": f"tiled_docs_block_{index}"})
    assert capsys.readouterr().out  # each block prints its outcome
