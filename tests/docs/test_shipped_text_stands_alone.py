"""What a user receives stands alone: the package's sources and stubs, and
the docstrings the built extension carries, never point to files kept
outside the repository (normative notes, specification paths) or to
machine-specific paths; docs/reference.md is where they send the reader.
(The documents themselves are checked in test_reference.py.)"""
import inspect
import pathlib
import re

import pytest

import strideweave as sw

PACKAGE = pathlib.Path(sw.__file__).resolve().parent
OUTSIDE = re.compile(r"API\.md|ARCHITECTURE\.md|\.\./shared|shared/|spec/[\w-]+\.(?:md|txt)|/work/|/root/|/home/")
SOURCES = sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyi") and "__pycache__" not in p.parts)


def hits(text):
    return [line.strip() for line in text.splitlines() if OUTSIDE.search(line)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_sources_point_nowhere_outside(path):
    assert hits(path.read_text(encoding="utf-8")) == []


def docstrings(module):
    """(qualified name, docstring) of a module, its public objects and their
    members."""
    yield module.__name__, module.__doc__ or ""
    for name, obj in vars(module).items():
        if name.startswith("__"):
            continue
        yield f"{module.__name__}.{name}", getattr(obj, "__doc__", None) or ""
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                yield f"{name}.{member}", getattr(value, "__doc__", None) or ""


def test_extension_docstrings_point_nowhere_outside():
    from strideweave.carriers import extension, move, tensorstore, tiled_evictable

    found = [(name, hits(doc)) for module in (sw._core, sw, extension, move, tiled_evictable, tensorstore)
             for name, doc in docstrings(module) if isinstance(doc, str) and hits(doc)]
    assert found == []
    assert len(list(docstrings(sw._core))) > 100  # the walk reaches the native names


def test_the_check_catches_outside_references():
    assert hits('"""Rules (API.md section 13)."""') and hits("see ../shared/spec/interop-movement.txt")
    assert hits("# spec/tiled-carrier-composition.md") and not hits("docs/reference.md, \"TiledEvictable\"")
