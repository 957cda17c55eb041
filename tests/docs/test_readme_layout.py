"""README.md's "Layout of the code" block matches the source tree: every path
it names exists, every folder of csrc/engine has an entry, and each engine
folder's entry names every file stem in that folder."""
import dataclasses
import pathlib
import re

import pytest


def _repo_root() -> pathlib.Path:
    for d in pathlib.Path(__file__).resolve().parents:
        if (d / "README.md").is_file() and (d / "meson.build").is_file():
            return d
    raise AssertionError("no README.md and meson.build above " + __file__)


ROOT = _repo_root()
ENGINE = ROOT / "csrc" / "engine"
# A line indented this far continues the description above it; otherwise a
# line's path column is what comes before its first run of two spaces.
DESCRIPTION_COLUMN = 25
FILE_SUFFIXES = (".py", ".pyi", ".cpp", ".hpp", ".h", ".sh", ".md", ".yml", ".toml", ".json", ".typed", ".build")


def _layout_block(readme: str) -> list:
    m = re.search(r"^## Layout of the code\n+```\n(.*?)^```", readme, re.S | re.M)
    assert m, 'README.md has no "## Layout of the code" section with a code block'
    return m.group(1).splitlines()


@dataclasses.dataclass
class Entry:
    """A line of the block that starts with paths: the directory they are
    relative to, the paths, the description (continuation lines included)."""

    top: pathlib.Path
    names: list
    description: str
    line: str


def _split_names(column: str) -> list:
    """The paths of a path column: comma-separated, parenthesised remarks
    dropped, "..." skipped, "module.hpp/.cpp" meaning module.hpp and
    module.cpp."""
    column = re.sub(r"\([^)]*\)", "", column)
    names = []
    for part in column.split(","):
        part = part.strip()
        if not part or part == "...":
            continue
        m = re.fullmatch(r"(.+?)(\.\w+)((?:/\.\w+)+)", part)
        if m:
            names.append(m.group(1) + m.group(2))
            names.extend(m.group(1) + ext for ext in m.group(3).split("/")[1:] if ext)
            continue
        names.append(part)
    return names


def _entries() -> list:
    lines = _layout_block((ROOT / "README.md").read_text(encoding="utf-8"))
    entries = []
    top = ROOT
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent >= DESCRIPTION_COLUMN and entries:
            entries[-1].description += "\n" + line.strip()
            continue
        parts = re.split(r" {2,}", line.strip(), maxsplit=1)
        column, description = parts[0], (parts[1] if len(parts) > 1 else "")
        names = _split_names(column)
        if indent == 0:
            first = ROOT / names[0]
            top = first if names[0].endswith("/") else first.parent
            base = ROOT
        else:
            base = top
        entries.append(Entry(base, names, description, line))
    return entries


def _exists(base: pathlib.Path, name: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", name).rstrip("/")
    if "*" in pattern:
        return any(base.glob(pattern))
    return (base / pattern).exists()


def _path_tokens(description: str) -> list:
    """Tokens of a description that are paths: a file name with a known suffix
    (or a ".*" wildcard suffix), or a name ending in "/"."""
    tokens = []
    # A path wrapped after its "/" continues on the next line ("tests/" then
    # "test_guide.py").
    description = re.sub(r"/\n", "/", description)
    for raw in description.split():
        tok = raw.strip("()[],;:'\"`")
        # Calls ("static_type()"), addresses and bare suffixes (".cpp") are
        # not paths.
        if "(" in tok or ")" in tok or tok.startswith("http") or re.fullmatch(r"\.\w+", tok):
            continue
        if tok.endswith("/") or tok.endswith(FILE_SUFFIXES) or re.fullmatch(r"[\w/.-]+\.\*", tok):
            tokens.append(tok)
    return tokens


ENTRIES = _entries()


def test_the_layout_block_has_entries_for_the_main_folders():
    tops = {e.names[0] for e in ENTRIES if e.top == ROOT}
    for folder in ("strideweave/", "csrc/python/", "csrc/engine/", "tests/", "tests/cpp/", "subprojects/dlpack/"):
        assert folder in tops, f"README layout block has no entry for {folder}"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.line.strip()[:40])
def test_every_path_an_entry_names_exists(entry):
    missing = [n for n in entry.names if not _exists(entry.top, n)]
    assert not missing, f"README layout names {missing} under {entry.top.relative_to(ROOT) or '.'}, which do not exist"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.line.strip()[:40])
def test_every_path_a_description_names_exists(entry):
    """A path in a description is relative to the repository, to the entry's
    folder or to the folder the entry sits in."""
    own = [entry.top / n for n in entry.names if n.endswith("/")]
    bases = [ROOT, entry.top, *own]
    missing = [t for t in _path_tokens(entry.description) if not any(_exists(b, t) for b in bases)]
    assert not missing, f"README layout line {entry.line.strip()!r} names {missing}, which do not exist"


def _engine_entries() -> dict:
    """The entries under csrc/engine/, by folder name."""
    out = {}
    for e in ENTRIES:
        if e.top == ENGINE:
            for n in e.names:
                out[n.rstrip("/")] = e
    return out


def test_every_engine_folder_has_an_entry():
    folders = sorted(p.name for p in ENGINE.iterdir() if p.is_dir())
    listed = _engine_entries()
    assert folders, "csrc/engine has no folders"
    assert [f for f in folders if f not in listed] == []


def test_nothing_but_the_build_file_is_flat_in_csrc_engine():
    flat = sorted(p.name for p in ENGINE.iterdir() if p.is_file())
    assert flat == ["meson.build"]


@pytest.mark.parametrize("folder", sorted(p.name for p in ENGINE.iterdir() if p.is_dir()))
def test_an_engine_folder_entry_names_each_of_its_files(folder):
    entry = _engine_entries().get(folder)
    assert entry is not None, f"README layout has no entry for csrc/engine/{folder}/"
    stems = sorted({p.stem for p in (ENGINE / folder).iterdir() if p.suffix in (".hpp", ".cpp")})
    unnamed = [s for s in stems if not re.search(rf"(?<![\w/]){re.escape(s)}(?![\w])", entry.description)]
    assert not unnamed, f"README layout's csrc/engine/{folder}/ line does not name {unnamed}"
