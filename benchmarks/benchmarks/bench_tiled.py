"""TiledEvictable expert routing (issue 13 item 8): 64 tiles of 1024 x 1024
Float32 (256 MiB) on a FileBacked secondary, 4 experts per router step.

* ``TiledProjection``: a cold 4-tile projection vs ``np.take`` on an
  ``np.memmap`` of the same file (copied into memory); target <= 1.0x.
* ``TiledPrefetch``: 8 router steps of project + compute, on demand vs with
  ``promote_async`` prefetch one step ahead; ``track_hidden_percent`` is
  the share of the on-demand transfer time the prefetch hides.
* ``TiledMemory``: peak RSS growth (MiB) of one 4-tile projection measured
  in a child process, against the 16 MiB selected.

The cases reuse ``benchmarks/tiled_compare.py`` (the compare.py rows), so
both report the same measurement. Building the 256 MiB file takes a few
seconds per ``setup``.
"""
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))  # benchmarks/: tiled_compare
if os.environ.get("STRIDEWEAVE_BUILD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))  # the source package

import numpy as np  # noqa: E402

import tiled_compare as tc  # noqa: E402  (benchmarks/tiled_compare.py)

IDX = [3, 17, 42, 60]


class TiledProjection:
    number = 1
    repeat = (3, 9, 20.0)
    warmup_time = 0
    timeout = 300

    def setup(self):
        self.te, self.w, self.mm = tc.build()
        self.sel = tc.selection(IDX)
        self.dest = tc.sw.CPU(tc.K * tc.TILE)

    def teardown(self):
        del self.mm
        self.te.release()

    def time_project_cold(self):
        # project() reads cold tiles straight into the destination: every
        # sample is cold (the tiles stay secondary-resident).
        self.te.project(self.w, self.sel).wait()

    def time_project_cold_into_reused_destination(self):
        # the router loop's steady state: one destination reused per step
        self.te.project(self.w, self.sel, self.dest).wait()

    def time_numpy_memmap_take(self):
        np.take(self.mm, IDX, axis=0)


class TiledPrefetch:
    number = 1
    repeat = (1, 3, 30.0)
    warmup_time = 0
    timeout = 300
    steps, work = 8, 4

    def setup(self):
        self.te, self.w, self.mm = tc.build()
        self.plan = tc.schedule(self.steps)
        self.buf = np.empty((tc.K, tc.TILE), dtype=np.float32)

    def teardown(self):
        del self.mm
        self.te.release()

    def time_steps_on_demand(self):
        tc.run_steps(self.te, self.w, self.plan, self.buf, self.work, False)

    def time_steps_prefetch_one_ahead(self):
        tc.run_steps(self.te, self.w, self.plan, self.buf, self.work, True)

    def time_steps_project_one_ahead(self):
        # the next step's project() issued before this step computes
        tc.run_steps(self.te, self.w, self.plan, self.buf, self.work, "project")

    def track_hidden_percent(self):
        rows = []
        _, _, _, hidden = tc.prefetch_rows(lambda *a, **k: rows.append(a), self.te, self.w, self.steps, self.work,
                                           3, from_disk=True)
        return 100.0 * hidden

    track_hidden_percent.unit = "%"


class TiledMemory:
    number = 1
    repeat = 1
    timeout = 300

    def track_peak_rss_growth_mib(self):
        rows = []
        out = tc.memory_rows(lambda *a, **k: rows.append(a))
        if out is None:
            raise NotImplementedError("the RSS child failed")
        return out[0] / 2 ** 20

    track_peak_rss_growth_mib.unit = "MiB"

    def track_numpy_take_rss_growth_mib(self):
        rows = []
        out = tc.memory_rows(lambda *a, **k: rows.append(a))
        if out is None:
            raise NotImplementedError("the RSS child failed")
        return out[1] / 2 ** 20

    track_numpy_take_rss_growth_mib.unit = "MiB"


if __name__ == "__main__":
    t = TiledProjection()
    t.setup()
    for name in ("time_project_cold", "time_numpy_memmap_take"):
        t0 = time.perf_counter()
        getattr(t, name)()
        print(f"{name}: {(time.perf_counter() - t0) * 1e3:.2f} ms")
    t.teardown()
