"""Shape.encode / Shape.decode (API.md sections 2 and 11): first-mode-fastest
ordinals of keys, NumPy integers accepted, bools rejected."""
import itertools

import numpy as np
import pytest

from strideweave import Layout, Shape, Stride

NOT_IN_DOMAIN = "Key is not in domain of shape"


def test_encode_matches_the_canonical_layout_and_decode_inverts_it():
    s = Shape([2, [3, 4]])
    assert s.encode([1, [2, 3]]) == s.encode((1, 11)) == s.encode(23) == 23
    assert s.decode(23) == (1, (2, 3))
    canonical = Layout.canonical(s)
    for i in range(s.size):
        key = s.decode(i)
        assert s.encode(key) == i == canonical.index(key)


@pytest.mark.parametrize("tree", [[5], [2, 3], [[2, [3]], 4], [1, [1, 2], 3], []])
def test_round_trip_over_every_ordinal(tree):
    s = Shape(tree)
    decoded = [s.decode(i) for i in range(s.size)]
    assert len(set(decoded)) == s.size
    assert [s.encode(k) for k in decoded] == list(range(s.size))


def test_decode_is_first_mode_fastest():
    s = Shape([2, 3])
    assert [s.decode(i) for i in range(6)] == [(a, b) for b, a in itertools.product(range(3), range(2))]
    assert Shape().decode(0) == ()
    assert Shape(5).decode(3) == (3,)


def test_index_objects_are_accepted_and_bools_rejected():
    s = Shape([2, [3, 4]])
    assert s.encode([np.int64(1), [np.int32(2), np.uint8(3)]]) == 23
    assert s.encode(np.int64(7)) == 7
    assert s.decode(np.int64(23)) == (1, (2, 3))
    with pytest.raises(TypeError):
        s.encode(True)
    with pytest.raises(TypeError):
        s.encode([1, [True, 0]])
    with pytest.raises(TypeError, match="bool"):
        s.decode(True)
    with pytest.raises(TypeError):
        s.decode(1.0)


def test_out_of_range_errors_name_the_key_and_the_shape():
    s = Shape([2, [3, 4]])
    with pytest.raises(ValueError, match=NOT_IN_DOMAIN) as e:
        s.encode([2, 0])
    assert "[2, 0]" in str(e.value) and "Shape<(2, (3, 4))>" in str(e.value)
    for bad in (24, -1, 2**70):
        with pytest.raises(ValueError, match=r"outside Shape<\(2, \(3, 4\)\)>"):
            s.decode(bad)
    with pytest.raises(ValueError, match=NOT_IN_DOMAIN):
        s.encode(24)


def test_stride_has_no_codec():
    assert not hasattr(Stride(1), "encode") and not hasattr(Stride(1), "decode")
