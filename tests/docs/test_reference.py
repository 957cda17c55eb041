"""The documentation stands alone: docs/reference.md documents every public
name (strideweave.__all__, the stub _core.pyi, the public submodules' __all__)
and every public member in its class's section, and every relative link in
README.md, docs/ and benchmarks/README.md resolves to a file inside the
repository; no document points to a file outside it."""
import ast
import dataclasses
import pathlib
import re
import types

import pytest

import strideweave as sw
from support.process import REPO as ROOT

REFERENCE = ROOT / "docs" / "reference.md"
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SUBMODULES = ["carriers/move.py", "carriers/extension.py", "carriers/tiled_evictable.py", "carriers/tensorstore.py"]
# Members whose names start with "_" but are part of the documented contract:
# the hooks a subclass overrides or calls, and the interchange protocols.
DOCUMENTED_PRIVATE = {
    "_copy", "_forward", "_is_mutable", "_release", "_claim_ownership", "_relinquish_ownership",
    "_begin_owner_access", "_end_owner_access", "_from_representation",
    "__dlpack__", "__dlpack_device__", "__array__", "__dlpack_c_exchange_api__",
}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _code_identifiers(markdown: str) -> set:
    """Identifiers inside inline code spans and headings (where a reference
    names things), not in prose."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    spans = re.findall(r"`([^`]+)`", prose)  # a span may wrap onto the next line
    headings = re.findall(r"^#+ (.*)$", markdown, re.M)
    return {w for text in spans + headings for w in IDENT.findall(text)}


def _sections(markdown: str) -> list:
    """(heading text, level, body up to the next heading of the same or a
    higher level) for every heading outside fenced code blocks."""
    lines, fenced, heads = markdown.splitlines(), False, []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", line):
            heads.append((i, len(line) - len(line.lstrip("#")), line.lstrip("#").strip()))
    out = []
    for k, (i, level, text) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out.append((text, level, "\n".join(lines[i:end])))
    return out


def _stub_classes() -> dict:
    """Public class name -> documented member names, from _core.pyi."""
    tree = ast.parse((ROOT / "strideweave" / "_core.pyi").read_text())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            classes[node.name] = {m for m in members if not m.startswith("_") or m in DOCUMENTED_PRIVATE}
    return classes


def _stub_functions() -> set:
    tree = ast.parse((ROOT / "strideweave" / "_core.pyi").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def _module_all(relpath: str) -> list:
    """A submodule's __all__, read from its source (tensorstore.py imports an
    optional package)."""
    tree = ast.parse((ROOT / "strideweave" / relpath).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"strideweave/{relpath} has no __all__")


def _python_class_members(cls: type) -> set:
    members = {m for m in vars(cls) if not m.startswith("_")}
    if dataclasses.is_dataclass(cls):
        members |= {f.name for f in dataclasses.fields(cls)}
    return members


def _tensorstore_members() -> set:
    tree = ast.parse((ROOT / "strideweave" / "carriers" / "tensorstore.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TensorStoreCarrier")
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


@pytest.fixture(scope="module")
def reference() -> str:
    assert REFERENCE.is_file(), "docs/reference.md is missing"
    return REFERENCE.read_text(encoding="utf-8")


def test_all_lists_exactly_the_public_top_level_names():
    public = {n for n in dir(sw) if not n.startswith("_") and not isinstance(getattr(sw, n), types.ModuleType)}
    assert len(sw.__all__) == len(set(sw.__all__)), "strideweave.__all__ has duplicates"
    assert sorted(set(sw.__all__) - public) == [], "names in __all__ that strideweave does not define"
    assert sorted(public - set(sw.__all__)) == [], "public names missing from strideweave.__all__"
    namespace: dict = {}
    exec("from strideweave import *", namespace)
    assert {n for n in namespace if n != "__builtins__"} == set(sw.__all__)


def test_every_public_name_appears_in_the_reference(reference):
    documented = _code_identifiers(reference)
    names = set(sw.__all__) | set(_stub_classes()) | _stub_functions() | {"__version__"}
    for relpath in SUBMODULES:
        names |= set(_module_all(relpath))
    missing = sorted(n for n in names if n not in documented)
    assert missing == [], f"public names docs/reference.md does not document: {missing}"


def test_every_public_member_appears_in_its_class_section(reference):
    sections = _sections(reference)
    classes = dict(_stub_classes())
    for name in sw.__all__:
        obj = getattr(sw, name)
        if isinstance(obj, type) and name not in classes:
            classes[name] = _python_class_members(obj)
    classes["TensorStoreCarrier"] = _tensorstore_members()
    problems = []
    for cls, members in sorted(classes.items()):
        bodies = [body for text, _, body in sections if re.search(rf"`{cls}\b", text)]
        if not bodies:
            problems.append(f"no section whose heading names `{cls}`")
            continue
        documented = _code_identifiers("\n".join(bodies))
        missing = sorted(m for m in members if m not in documented)
        if missing:
            problems.append(f"{cls}: {missing}")
    assert problems == [], "members docs/reference.md does not document in their class's section:\n" + "\n".join(problems)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _links(markdown: str) -> list:
    """Markdown link targets outside fenced code blocks."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)


def _link_problems(doc: pathlib.Path, root: pathlib.Path) -> list:
    problems = []
    for target in _links(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if root not in dest.parents:
            problems.append(f"{target}: points outside the repository")
        elif not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md":
            slugs = {_slug(text) for text, _, _ in _sections(dest.read_text(encoding="utf-8"))}
            if anchor not in slugs:
                problems.append(f"{target}: no heading with that anchor")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(doc):
    assert _link_problems(doc, ROOT) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_points_outside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    # Normative files kept outside the repository, and machine-specific paths.
    pattern = re.compile(r"API\.md|\.\./shared|shared/|spec/[\w-]+\.(?:md|txt)|/work/|/root/|/home/")
    hits = [line.strip() for line in text.splitlines() if pattern.search(line)]
    assert hits == []


def test_the_link_checker_catches_broken_and_outside_links(tmp_path):
    # The checker itself: a missing file, an escaping path and a missing
    # anchor are reported; a good link and a link inside a code block are not.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title `here`\n")
    doc = tmp_path / "README.md"
    doc.write_text("[ok](docs/a.md#title-here) [gone](docs/b.md) [out](../x.md) [anchor](docs/a.md#nope)\n"
                   "[web](https://example.org/x.md)\n```\n[in code](nowhere.md)\n```\n")
    assert _link_problems(doc, tmp_path) == [
        "docs/b.md: no such file",
        "../x.md: points outside the repository",
        "docs/a.md#nope: no heading with that anchor",
    ]
