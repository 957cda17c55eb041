"""Fixtures more than one test folder uses. Helpers (builders, test carriers,
the subprocess runner) live in the support package (tests/support/), which
test modules import as ``support.<module>``; a test folder's own fixtures are
in its conftest.py or in the test file that uses them."""
import pytest

from support.doubles import testing_extension


@pytest.fixture
def fake():
    """The fake Metal runtime of strideweave._testing, installed for one test
    (skips where the test-only extension is absent)."""
    _testing = testing_extension()
    ctl = _testing.install_fake_metal_runtime()
    try:
        yield ctl
    finally:
        ctl.hold_synchronize(False)
        _testing.remove_metal_runtime()


@pytest.fixture(scope="module")
def s3():
    """A loopback S3 server for the tests of one module: (endpoint, boto3
    client). Skips without moto's server mode or boto3."""
    pytest.importorskip("moto.server", reason="moto[server] provides the loopback S3 server")
    pytest.importorskip("boto3")
    from support.s3 import s3_server

    with s3_server() as server:
        yield server
