"""Smoke test of benchmarks/tiled_compare.py (the compare.py --only-tiled
rows and asv bench_tiled.py) at a tiny size, so the benchmark code stays
runnable; the real sizes run only from the benchmark entry points."""
import sys

import pytest
from support.process import REPO

BENCH = REPO / "benchmarks"


@pytest.fixture
def tc(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import tiled_compare
    monkeypatch.setattr(tiled_compare, "ROWS", 8)
    monkeypatch.setattr(tiled_compare, "COLS", 4)
    monkeypatch.setattr(tiled_compare, "TILE", 32)
    yield tiled_compare
    sys.modules.pop("tiled_compare", None)


def test_cold_and_prefetch_rows_run_and_check_their_values(tc):
    rows = []

    def add(case, ours, theirs, target=None, ratio=None):
        rows.append((case, ours, theirs, target, ratio))

    te, w, mm = tc.build()
    try:
        for from_disk in (False, True):
            o, t = tc.cold_rows(add, te, w, 2, from_disk)  # asserts equality with np.take
            assert o > 0 and t > 0
        c, p, k, hidden = tc.prefetch_rows(add, te, w, 3, 1, 1)
        assert c > 0 and p > 0 and k > 0
        tc.reused_destination_rows(add, te, w, 2)  # asserts equality with np.take
        tc.decomposition_rows(add, te, 2)
    finally:
        del mm
        te.release()
    assert len(rows) == 2 + 5 + 1 + 1
    assert rows[0][3] == "<= 1.0"
    assert any("hidden" in r[0] for r in rows)
    assert any("one step ahead instead of promote_async" in r[0] for r in rows)
    assert any("reused destination" in r[0] for r in rows)


def test_schedule_keeps_consecutive_steps_disjoint(tc):
    plan = tc.schedule(10)
    assert all(len(set(s)) == tc.K for s in plan)
    assert all(not set(a) & set(b) for a, b in zip(plan, plan[1:]))
