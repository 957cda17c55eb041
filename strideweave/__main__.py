"""python -m strideweave: the demo (export to NumPy, move through a file)."""
print("strideweave demo: not built yet")
