"""TensorStoreCarrier(slots) checks the size limit create() checks: beyond
TensorStore's largest extent (2**62 - 1) it raises ValueError naming the
limit, where it used to say "domain must be specified" (2**62) or raise an
OverflowError about index-sized integers (2**63)."""
import pytest

ts = pytest.importorskip("tensorstore", reason="the optional tensorstore package (pip install strideweave[tensorstore])")

from strideweave.carriers.tensorstore import TensorStoreCarrier  # noqa: E402

LIMIT = r"slots must be at most 2\*\*62 - 1 \(4611686018427387903\), TensorStore's largest array extent, not "


@pytest.mark.parametrize("slots", [2**62, 2**63, 2**64 + 5])
def test_the_constructor_names_tensorstores_largest_extent(slots):
    with pytest.raises(ValueError, match=LIMIT + str(slots)):
        TensorStoreCarrier(slots)


def test_allocate_like_names_the_same_limit():
    c = TensorStoreCarrier(2)
    with pytest.raises(ValueError, match=LIMIT + str(2**62)):
        c.allocate_like(2**62)
    assert c.size() == 2  # the source is untouched


def test_the_limit_itself_and_the_other_checks_are_unchanged():
    assert TensorStoreCarrier(2**62 - 1).size() == 2**62 - 1  # an in-memory store holds no data until written
    with pytest.raises(ValueError, match="slots must be non-negative"):
        TensorStoreCarrier(-1)
    with pytest.raises(TypeError, match="slots must be an int, not bool"):
        TensorStoreCarrier(True)
