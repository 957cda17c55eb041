"""A StorageProvider's allocate, write and release report success by
returning None; any other result (a status code, True, an awaitable) is
refused with TypeError naming the callable, never trusted (fail closed)."""
import pytest

import strideweave as sw
from strideweave.carriers import extension as ext

F32 = sw.DType.Float32


def defined(name, *, allocate_result=None, write_result=None, release_result=None):
    """A fresh definition-backed class whose provider keeps its slots in a
    list and returns the given results."""
    log = {"writes": [], "releases": 0}

    def allocate(c, n):
        c._slots = [0.0] * n
        return allocate_result

    def write(c, i, v):
        c._slots[i] = v
        log["writes"].append((i, v))
        return write_result

    def release(c):
        log["releases"] += 1
        c._slots = []
        return release_result

    cls = type(name, (sw.Carrier,), {})
    ext.register_carrier_definition(cls, ext.CarrierDefinition(ext.StorageProvider(
        supports_dtype=lambda c, d: d is F32,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=allocate, release=release,
        read=lambda c, i: c._slots[i], write=write)))
    return cls, log


RESULTS = [0, 1, True, False, "ok", (), object()]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: type(r).__name__)
def test_allocate_returning_a_value_refuses_the_construction(result):
    cls, _ = defined("AllocReturns", allocate_result=result)
    with pytest.raises(TypeError, match=rf"AllocReturns StorageProvider.allocate\(\) must return None, not "
                                        rf"{type(result).__name__}"):
        cls(3, dtype=F32)


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: type(r).__name__)
def test_write_returning_a_value_fails_the_write(result):
    cls, log = defined("WriteReturns", write_result=result)
    c = cls(2, dtype=F32)
    with pytest.raises(TypeError, match=r"WriteReturns StorageProvider.write\(\) must return None"):
        c[0] = 1.5
    assert c.version == 0  # not counted as a successful write
    assert log["writes"] == [(0, 1.5)]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: type(r).__name__)
def test_release_returning_a_value_raises_and_the_carrier_stays_released(result):
    cls, log = defined("ReleaseReturns", release_result=result)
    c = cls(2, dtype=F32)
    with pytest.raises(TypeError, match=r"ReleaseReturns StorageProvider.release\(\) must return None"):
        c.release()
    assert c.is_released() and c.size() == 0 and log["releases"] == 1
    c.release()  # idempotent: the provider is not called again
    assert log["releases"] == 1
    with pytest.raises(RuntimeError, match="released"):
        c[0]


def test_providers_returning_none_work():
    cls, log = defined("ReturnsNone")
    c = cls(2, dtype=F32)
    c[1] = 2.5
    assert c[1] == 2.5 and c.version == 1
    c.release()
    assert c.is_released() and log["releases"] == 1
