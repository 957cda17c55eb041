"""Ownership during moves: tokens are unguessable and a guessed one cannot
relinquish a pending move, and a slot write whose value conversion starts
a move or claims the carrier is refused instead of lost."""
import pytest

import strideweave as sw


F32 = sw.DType.Float32
WAIT = 10.0


def values(t):
    return [t[i] for i in range(t.size())]


def test_ownership_tokens_are_not_a_counter():
    cs = [sw.CPU(1) for _ in range(64)]
    tokens = [c._claim_ownership() for c in cs]
    assert all(isinstance(t, int) and t > 0 for t in tokens)
    assert len(set(tokens)) == len(tokens)
    diffs = {b - a for a, b in zip(tokens, tokens[1:])}
    assert len(diffs) > 1  # not consecutive, nor any fixed step
    assert max(tokens) > 2 ** 40  # drawn from 63 random bits
    for c, t in zip(cs, tokens):
        c._relinquish_ownership(t)


def test_guessed_token_cannot_relinquish_a_pending_move():
    from support.carriers import SrcCPU
    from support.moves import Gate, held_operation
    gate = Gate()
    Held = held_operation(gate)
    src = SrcCPU(2, dtype=F32)
    src[0], src[1] = 1.0, 2.0
    t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([2])))
    dst = sw.CPU(2, dtype=F32)
    probe = sw.CPU(1)
    with sw.registered_move_operation(SrcCPU, sw.CPU, Held):
        h = sw.move_async(t, dst)
        try:
            assert gate.entered.wait(WAIT)
            near = probe._claim_ownership()
            probe._relinquish_ownership(near)
            for guess in list(range(1, 300)) + list(range(near - 300, near + 300)):
                for c in (src, dst):
                    try:
                        c._relinquish_ownership(guess)
                    except RuntimeError:
                        pass
            assert src.is_owned() and dst.is_owned()
            with pytest.raises(RuntimeError, match="owned"):
                src.release()
        finally:
            gate.release.set()
        r = h.wait(timeout=WAIT)
    assert values(r) == [1.0, 2.0]


def test_write_whose_conversion_starts_a_move_is_refused_not_lost():
    src = sw.CPU(2, dtype=F32)
    src[0], src[1] = 1.0, 2.0
    t = sw.Tensor(src, 0, sw.Layout.canonical(sw.Shape([2])))
    dst = sw.CPU(2, dtype=F32)
    handles = []

    class Sneaky:
        def __float__(self):
            handles.append(sw.move_async(t, dst))
            return 5.0

    with pytest.raises(RuntimeError, match="changed during the write"):
        src[0] = Sneaky()
    r = handles[0].wait(timeout=WAIT)
    assert values(r) == [1.0, 2.0]  # the refused write is not half-applied


def test_write_whose_conversion_claims_the_carrier_is_refused():
    c = sw.CPU(1, dtype=sw.DType.Int32)
    tokens = []

    class Claiming:
        def __index__(self):
            tokens.append(c._claim_ownership())
            return 3

    with pytest.raises(RuntimeError, match="changed during the write"):
        c[0] = Claiming()
    assert c[0] == 0
    c._relinquish_ownership(tokens[0])
    c[0] = 4
    assert c[0] == 4
