"""Every ```python block of docs/files.md runs as written: in order, in one
fresh interpreter, from a scratch working directory that is also its
temporary directory (so the recipes leave nothing behind elsewhere)."""
import re

import pytest

from support.process import REPO, assert_child_ok, run_python

DOC = REPO / "docs" / "files.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def test_the_document_has_its_recipes():
    assert len(BLOCKS) >= 6
    text = "\n".join(BLOCKS)
    for needed in ("FileBacked.open", "FileBacked.create", "safetensors", "np.lib.format", "os.fork"):
        assert needed in text, needed


def test_every_block_runs_in_order(tmp_path):
    pytest.importorskip("safetensors", reason="a recipe reads a safetensors file (an optional test dependency)")
    # Each block is compiled on its own so a failure names its block.
    program = "\n".join(f"exec(compile({block!r}, 'docs/files.md block {i + 1}', 'exec'), globals())"
                        for i, block in enumerate(BLOCKS))
    out = run_python(program, cwd=str(tmp_path), env={"TMPDIR": str(tmp_path)}, timeout=300)
    assert_child_ok(out)
    # What the recipes made in the working directory is all that is left.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "result.bin", "weights.npy"]
