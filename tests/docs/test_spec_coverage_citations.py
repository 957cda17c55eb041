"""The spec coverage tables (docs/spec_coverage_*.md) cite tests that exist:
every `test_...` name they give is a test function somewhere under tests/
(or a test file there); a name ending in `_*` or `_...` stands for the tests
it prefixes, at least one of which exists."""
import re

import pytest

from support.process import REPO

TESTS = REPO / "tests"
TABLES = sorted((REPO / "docs").glob("spec_coverage_*.md"))
# A test function, or the file part of "dlpack/test_export::test_x".
CITED = re.compile(r"\b(test_[A-Za-z0-9_]*)(\*|\.\.\.)?")
# "test_*" (every test of the file named before it) and the legend's
# placeholder "test_x".
NOT_NAMES = {"test_", "test_x"}


def defined_tests():
    names = set()
    for path in TESTS.rglob("test_*.py"):
        names.add(path.stem)
        names.update(re.findall(r"^\s*(?:async\s+)?def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    return names


DEFINED = defined_tests()


def citations(table):
    for line in table.read_text(encoding="utf-8").splitlines():
        for m in CITED.finditer(line):
            yield m.group(1), bool(m.group(2)) or m.group(1).endswith("_")


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_every_cited_test_exists(table):
    missing = []
    for name, prefix in citations(table):
        if name in NOT_NAMES:
            continue
        found = any(d.startswith(name) for d in DEFINED) if prefix else name in DEFINED
        if not found:
            missing.append(name)
    assert missing == []


def test_the_tables_cite_many_tests():
    assert len(TABLES) == 2
    assert all(len(list(citations(t))) > 50 for t in TABLES)


def test_a_missing_name_is_noticed():
    assert "test_tile_transfers_use_the_exact_pair_route" not in DEFINED
    assert "test_every_tile_transfer_starts_before_the_call_returns_and_commit_is_atomic" in DEFINED
