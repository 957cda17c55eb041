"""Every ```python block of docs/guide.md and of the README runs as written.

The blocks of one document run in order in one fresh interpreter (a later
block may use an earlier block's names; carrier definitions are
process-wide), from a scratch working directory.
"""
import os
import re
import subprocess
import sys

import pytest

import strideweave
from support.process import REPO, assert_child_ok

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(relpath):
    with open(os.path.join(REPO, relpath), encoding="utf-8") as f:
        return BLOCK.findall(f.read())


def run_blocks(blocks, cwd):
    # Each block is compiled separately so a failure names its block.
    program = "\n".join(
        f"exec(compile({block!r}, 'block {i + 1}', 'exec'), globals())" for i, block in enumerate(blocks))
    env = dict(os.environ)
    # The package this test imported, whichever it is (source tree or installed).
    here = os.path.dirname(os.path.dirname(os.path.abspath(strideweave.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    if env.get("STRIDEWEAVE_BUILD"):
        env["STRIDEWEAVE_BUILD"] = os.path.abspath(env["STRIDEWEAVE_BUILD"])
    return subprocess.run([sys.executable, "-c", program], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_block_extraction():
    blocks = BLOCK.findall("text\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = a\n```\n")
    assert blocks == ["a = 1\n", "b = a\n"]


@pytest.mark.parametrize("document, minimum", [("docs/guide.md", 10), ("README.md", 1)])
def test_every_python_block_runs(document, minimum, tmp_path):
    blocks = python_blocks(document)
    assert len(blocks) >= minimum
    out = run_blocks(blocks, str(tmp_path))
    assert_child_ok(out)


def test_the_guide_covers_what_it_promises():
    with open(os.path.join(REPO, "docs", "guide.md"), encoding="utf-8") as f:
        text = f.read()
    for heading in ("Data in and out", "Exports and their lifetime rule", "Moves and async moves", "Evictable",
                    "Writing a carrier with the extension API", "Profiling and the trace in Perfetto"):
        assert f". {heading}" in text
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert "docs/guide.md" in f.read()
