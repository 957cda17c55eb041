"""mypy --strict on a script, as a user would run it against this strideweave."""
import os
import pathlib
import sys

import strideweave as sw


def run_mypy_strict(source, tmp_path):
    """mypy --strict on source (a script's text) as a user would run it
    against this strideweave; returns mypy's stdout lines and stderr."""
    from mypy import api

    package_root = pathlib.Path(sw.__file__).resolve().parent.parent
    src = tmp_path / "snippet.py"
    src.write_text(source)
    args = [str(src), "--strict", "--no-incremental", "--cache-dir", os.devnull, "--python-executable",
            sys.executable, "--no-error-summary", "--hide-error-context"]
    env_before = os.environ.get("MYPYPATH")
    if "site-packages" not in package_root.parts:  # dev mode: the source tree's package
        os.environ["MYPYPATH"] = str(package_root)
    try:
        out, err, _ = api.run(args)
    finally:
        if env_before is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_before
    return out.splitlines(), err
