"""What the tests share, one module per concern (fixtures stay in the
conftest.py files; pytest puts tests/ on sys.path through the
``pythonpath`` setting in pyproject.toml, so test modules and subprocess
scripts import ``support.<module>``):

- builders: the tensor builders (one builder, one fill rule) and small
  value helpers;
- carriers: small Python test carriers;
- process: the child-interpreter runner and the paths of the checkout;
- moves: held transfers for deterministic asynchronous tests;
- extension: definition-backed carrier classes for the extension API;
- dlpack: ctypes views of DLPack capsules and capsule producers;
- tiled: TiledEvictable builders, knobs and the peak-memory child;
- doubles: the test-only extension strideweave._testing;
- typecheck: mypy --strict on a user's script;
- s3: the loopback S3 server (moto) of the TensorStore tests.
"""
