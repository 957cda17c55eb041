"""``python -m strideweave``: the demo.

Builds a hierarchical-layout tensor on CPU storage, hands it to NumPy
without a copy through DLPack, then moves it through a file-backed carrier
and back, printing what happened at each step.
"""
import sys

import strideweave as sw


def main() -> int:
    layout = sw.Layout(sw.Shape([2, [3, 4]]), sw.Stride([1, [2, 6]]))
    cpu = sw.CPU(layout.cosize, dtype=sw.DType.Float32)
    t = sw.Tensor(cpu, 0, layout)
    for i in range(layout.size):
        t[i] = float(i) * 0.5
    print(f"tensor: {layout!r} on CPU, {t.size()} values, storage at {hex(cpu.pointer())}")

    try:
        import numpy as np
    except ImportError:
        print("numpy is not installed: skipping the NumPy export (pip install numpy)")
    else:
        arr = np.from_dlpack(t)
        print(f"numpy view: shape {arr.shape}, strides {arr.strides}, "
              f"zero-copy={arr.ctypes.data == cpu.pointer()}")
        print(f"  t[(1, 11)] = {t[(1, 11)]}  arr[1, 2, 3] = {arr[1, 2, 3]}")
        del arr

    fb = sw.FileBacked(dtype=sw.DType.Float32)
    on_disk = sw.move(t, fb)
    print(f"moved to FileBacked {fb.path.name}: {fb.size()} slots, source released={cpu.is_released()}")
    dest = sw.CPU(layout.cosize, dtype=sw.DType.Float32)
    back = sw.move(on_disk, dest)
    same = all(back[i] == float(i) * 0.5 for i in range(layout.size))
    print(f"moved back to CPU: values identical={same}, file released={fb.is_released()}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
