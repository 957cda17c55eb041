"""Hypothesis stateful test (issue 15): random programs of slot writes, reads,
DLPack exports, foreign writes through exports, moves, releases, operations
and backward over a few small CPU / Generic / FileBacked carriers, checked
after every step against a pure-Python model of each carrier's slot values
and version (API.md sections 3, 4, 6, 7, 8 and 12; spec interop-movement).

Model rules used here (each one is a documented contract, not an observation):
- a successful slot write through the carrier or a tensor adds 1 to
  `version`; export, moves, release, allocation and writes through a DLPack
  view do not (API.md 3.1, spec "Export changes neither version tracking");
- Float32 slots round to binary32 (np.float32); elementwise ops are modelled
  with NumPy float32 arithmetic, exactly; `reduce_sum` and gradients are
  compared within a float32 rounding bound, since the accumulation order and
  width are not specified;
- a move fills the destination with the source values, releases the source
  and leaves the destination's version alone (spec "move relocates values");
- after release or move, a NumPy view of CPU storage reads zeros (API.md 12);
- every failed call leaves every carrier as it was.
Multipliers for `mul(t, k)` are drawn exactly representable in float32, so
rounding k before or after the product gives the same result.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import strideweave as sw

try:  # a second DLPack consumer with its own deleter path; optional
    import torch
except ImportError:  # pragma: no cover - torch is in the interop extra
    torch = None

F32, I32 = sw.DType.Float32, sw.DType.Int32
KINDS = ("cpu", "generic", "file")
MAX_LIVE = 6           # live carriers in the pool
MAX_VIEWS = 6          # NumPy views kept alive across later steps
POOL_LIMIT = 1e6       # op results above this magnitude are not pooled (no float32 overflow)

F32_VALUES = st.one_of(st.integers(-8, 8), st.floats(-100, 100, allow_nan=False),
                       st.floats(-100, 100, width=32, allow_nan=False))
I32_VALUES = st.integers(-2**31, 2**31 - 1)
FACTORS = st.one_of(st.integers(-3, 3), st.floats(-4, 4, width=32, allow_nan=False))


def values_for(dtype):
    return F32_VALUES if dtype is F32 else I32_VALUES


def np_dtype(dtype):
    return np.float32 if dtype is F32 else np.int32


def flat(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def make_carrier(kind, dtype, n, values=None):
    """A fresh carrier of n slots (FileBacked: empty, grows when moved into)."""
    if kind == "cpu":
        c = sw.CPU(n, dtype=dtype)
        for i, v in enumerate(values if values is not None else ()):
            c[i] = v
        return c
    if kind == "generic":
        zero = 0.0 if dtype is F32 else 0
        return sw.Generic(list(values) if values is not None else [zero] * n, dtype=dtype)
    return sw.FileBacked(dtype=dtype)


class Entry:
    """One carrier of the pool and its model."""

    def __init__(self, carrier, kind, dtype, values, version=0):
        self.carrier, self.kind, self.dtype = carrier, kind, dtype
        self.values = np.array(values, dtype=np_dtype(dtype))
        self.version = version
        self.released = False
        self.tensor = sw.Tensor(carrier, 0, flat(len(self.values)))

    def __repr__(self):
        return f"Entry({self.kind}, {self.dtype}, {self.values.tolist()}, v{self.version}, released={self.released})"


def snapshot(c):
    return (c.is_released(), c.size(), c.version)


def raises(exc, fragment, f, *args):
    with pytest.raises(exc) as info:
        f(*args)
    assert fragment in str(info.value), f"{fragment!r} not in {info.value!r}"


class StrideWeaveMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.entries = []      # every carrier ever pooled, live or released
        self.views = []        # [entry, numpy view, scribbled-after-release]
        self.n = 1

    # ------------------------------------------------------------ helpers

    def live(self, pred=lambda e: True):
        return [e for e in self.entries if not e.released and pred(e)]

    def released(self):
        return [e for e in self.entries if e.released]

    def add_entry(self, carrier, kind, dtype, values, version=0):
        e = Entry(carrier, kind, dtype, values, version)
        self.entries.append(e)
        return e

    def pick(self, data, entries):
        """An entry of `entries`, half the time one a kept view aliases (so
        views outlive releases and moves often)."""
        viewed = [e for e in entries if any(rec[0] is e for rec in self.views)]
        if viewed and data.draw(st.booleans()):
            return data.draw(st.sampled_from(viewed))
        return data.draw(st.sampled_from(entries))

    def mark_released(self, e):
        e.released = True

    @staticmethod
    def expected_read(e, i):
        return float(e.values[i]) if e.dtype is F32 else int(e.values[i])

    # ------------------------------------------------------------ setup

    @initialize(data=st.data())
    def init_pool(self, data):
        self.n = data.draw(st.integers(1, 4), label="n")
        for kind, dtype in (("cpu", F32), ("generic", F32), ("cpu", I32)):
            values = data.draw(st.lists(values_for(dtype), min_size=self.n, max_size=self.n))
            c = make_carrier(kind, dtype, self.n, values)
            version = self.n if kind == "cpu" else 0   # CPU filled slot by slot
            self.add_entry(c, kind, dtype, values, version)

    # ------------------------------------------------------------ carriers

    @precondition(lambda self: len(self.live()) < MAX_LIVE)
    @rule(data=st.data(), kind=st.sampled_from(("cpu", "generic")), dtype=st.sampled_from((F32, I32)))
    def new_carrier(self, data, kind, dtype):
        values = data.draw(st.lists(values_for(dtype), min_size=self.n, max_size=self.n))
        c = make_carrier(kind, dtype, self.n, values)
        self.add_entry(c, kind, dtype, values, self.n if kind == "cpu" else 0)

    # ------------------------------------------------------------ slots

    @rule(data=st.data(), via_tensor=st.booleans())
    def write_slot(self, data, via_tensor):
        e = data.draw(st.sampled_from(self.entries))
        i = data.draw(st.integers(0, self.n))          # n is out of range
        v = data.draw(values_for(e.dtype))
        target = e.tensor if via_tensor else e.carrier
        if e.released:
            raises(RuntimeError, "released", target.__setitem__, i if i < self.n else 0, v)
        elif i == self.n:
            if via_tensor:
                raises(ValueError, "Key is not in domain", target.__setitem__, i, v)
            else:
                with pytest.raises(IndexError):
                    target[i] = v
        else:
            target[i] = v
            e.values[i] = v        # numpy float32 / int32 conversion = the slot rule
            e.version += 1

    @rule(data=st.data())
    def write_wrong_type(self, data):
        """Int32 slots refuse floats (TypeError) and out-of-range ints
        (OverflowError); nothing changes."""
        cands = self.live(lambda e: e.dtype is I32)
        if not cands:
            return
        e = data.draw(st.sampled_from(cands))
        i = data.draw(st.integers(0, self.n - 1))
        if data.draw(st.booleans()):
            with pytest.raises(TypeError):
                e.carrier[i] = 1.5
        else:
            with pytest.raises(OverflowError):
                e.carrier[i] = data.draw(st.sampled_from((2**31, -2**31 - 1, 2**40)))

    @rule(data=st.data(), via_tensor=st.booleans())
    def read_slot(self, data, via_tensor):
        e = data.draw(st.sampled_from(self.entries))
        i = data.draw(st.integers(0, self.n - 1))
        target = e.tensor if via_tensor else e.carrier
        if e.released:
            raises(RuntimeError, "released", target.__getitem__, i)
        else:
            got = target[i]
            assert got == self.expected_read(e, i)
            assert type(got) is (float if e.dtype is F32 else int)

    # ------------------------------------------------------------ exports

    @rule(data=st.data(), keep=st.booleans())
    def export(self, data, keep):
        e = data.draw(st.sampled_from(self.entries))
        before = snapshot(e.carrier)
        if e.kind != "cpu":
            raises(BufferError, "DLPack is not supported", np.from_dlpack, e.tensor)
        elif e.released:
            raises(BufferError, "non-null", np.from_dlpack, e.tensor)
        else:
            view = np.from_dlpack(e.tensor)
            assert view.dtype == np_dtype(e.dtype)
            assert view.flags.writeable          # mutable carrier: flags word zero
            assert np.array_equal(view, e.values)
            if keep and len(self.views) < MAX_VIEWS:
                self.views.append([e, view, False])
        assert snapshot(e.carrier) == before     # export changes no version

    @precondition(lambda self: len(self.views) < MAX_VIEWS)
    @rule(data=st.data())
    def export_keep(self, data):
        """Export a live CPU carrier to NumPy or torch and keep the view for
        later steps (it then lives across writes, moves and releases)."""
        cands = self.live(lambda e: e.kind == "cpu")
        if not cands:
            return
        e = data.draw(st.sampled_from(cands))
        if torch is not None and data.draw(st.booleans()):
            view = torch.from_dlpack(e.tensor).numpy()   # the ndarray keeps the torch tensor alive
        else:
            view = np.from_dlpack(e.tensor, copy=False)
        assert np.array_equal(view, e.values)
        self.views.append([e, view, False])

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def foreign_write(self, data):
        """A write through a DLPack view bypasses the carrier: the value lands
        (live storage) but the version stays; after release it goes nowhere
        that matters (API.md 12) and must not crash or touch any carrier."""
        k = data.draw(st.integers(0, len(self.views) - 1))
        rec = self.views[k]
        e, view = rec[0], rec[1]
        i = data.draw(st.integers(0, self.n - 1))
        v = data.draw(values_for(e.dtype))
        view[i] = v
        event(f"foreign write, carrier released={e.released}")
        if e.released:
            # scribbled: the dead range's contents are no longer specified,
            # for every view of that range
            for other in self.views:
                if other[0] is e:
                    other[2] = True
        else:
            e.values[i] = v

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def drop_view(self, data):
        k = data.draw(st.integers(0, len(self.views) - 1))
        del self.views[k]

    # ------------------------------------------------------------ release

    @rule(data=st.data())
    def release(self, data):
        e = self.pick(data, self.entries)
        version = e.carrier.version
        assert e.carrier.release() is None
        assert e.carrier.release() is None      # idempotent
        self.mark_released(e)
        assert e.carrier.version == version

    # ------------------------------------------------------------ moves

    @rule(data=st.data(), how=st.sampled_from(("move", "async")), grad=st.booleans())
    def move(self, data, how, grad):
        src = self.pick(data, self.live() or self.entries)
        same = [d for d in self.live(lambda d: d.dtype is src.dtype and d is not src)]
        choice = data.draw(st.sampled_from(("fresh", "existing") if same else ("fresh",)))
        if src.released:
            dest = make_carrier("cpu", src.dtype, self.n)
            raises(RuntimeError, "released", sw.move, src.tensor, dest)
            assert snapshot(dest) == (False, self.n, 0)
            return
        if choice == "fresh":
            if len(self.live()) >= MAX_LIVE + 2:
                return
            kind = data.draw(st.sampled_from(KINDS))
            dest = make_carrier(kind, src.dtype, self.n)
            dest_entry = None
        else:
            dest_entry = data.draw(st.sampled_from(same))
            dest, kind = dest_entry.carrier, dest_entry.kind
        dest_version = dest.version
        values = src.values.copy()
        event(f"move {src.kind}->{kind} ({choice}, {how}, grad={grad})")
        with _grad(grad):
            if how == "move":
                result = sw.move(src.tensor, dest)
            else:
                handle = sw.move_async(src.tensor, dest)
                result = handle.wait()
                assert handle.done
                assert handle.wait() is result
        assert result.carrier is dest
        assert result.offset == 0 and result.layout == src.tensor.layout
        assert dest.version == dest_version, "a move must not count as a write"
        assert src.carrier.is_released() and src.carrier.size() == 0
        assert not dest.is_owned() and dest.is_mutable()
        self.mark_released(src)
        if dest_entry is None:
            dest_entry = self.add_entry(dest, kind, src.dtype, values, dest_version)
        else:
            dest_entry.values = values
        assert result.tolist() == [self.expected_read(dest_entry, i) for i in range(self.n)]

    @rule(data=st.data(), fault=st.sampled_from(("dtype", "own", "small", "immutable", "released", "not_carrier")))
    def move_refused(self, data, fault):
        """Every refused move raises its documented error and changes nothing
        (the invariant then re-checks every pooled carrier)."""
        cands = self.live()
        if not cands:
            return
        src = data.draw(st.sampled_from(cands))
        other = I32 if src.dtype is F32 else F32
        if fault == "dtype":
            dest = make_carrier(data.draw(st.sampled_from(KINDS)), other, self.n)
            exc, frag = TypeError, "dtype must match"
        elif fault == "own":
            dest, exc, frag = src.carrier, ValueError, "own carrier"
        elif fault == "small":
            if self.n < 2:
                return
            dest = make_carrier(data.draw(st.sampled_from(("cpu", "generic"))), src.dtype, self.n - 1)
            exc, frag = ValueError, "too small"
        elif fault == "immutable":
            dest = sw.CPU(self.n, dtype=src.dtype, mutable=False)
            exc, frag = RuntimeError, "mutable"
        elif fault == "released":
            dest = make_carrier(data.draw(st.sampled_from(KINDS)), src.dtype, self.n)
            dest.release()
            exc, frag = RuntimeError, "released"
        else:
            dest, exc, frag = [make_carrier("cpu", src.dtype, self.n)], TypeError, "Carrier instance"
        before = snapshot(dest) if isinstance(dest, sw.Carrier) else None
        event(f"move refused: {fault}")
        raises(exc, frag, sw.move_async if data.draw(st.booleans()) else sw.move, src.tensor, dest)
        if before is not None:
            assert snapshot(dest) == before

    # ------------------------------------------------------------ operations

    def _op_operands(self, data, arity):
        """Live Float32 CPU or Generic entries of one class, or None."""
        kind = data.draw(st.sampled_from(("cpu", "generic")))
        cands = self.live(lambda e: e.kind == kind and e.dtype is F32)
        if not cands:
            return None
        return [data.draw(st.sampled_from(cands)) for _ in range(arity)]

    def _pool_result(self, result, kind, values):
        assert result.carrier.version == 0, "op results are fresh storage, never written publicly"
        assert result.layout == flat(self.n)
        if len(self.live()) < MAX_LIVE and np.all(np.abs(values) <= POOL_LIMIT):
            e = self.add_entry(result.carrier, kind, F32, values, 0)
            e.tensor = result

    @rule(data=st.data(), op=st.sampled_from(("add", "mul", "mul_number", "relu", "neg")))
    def elementwise(self, data, op):
        arity = 2 if op in ("add", "mul") else 1
        ops = self._op_operands(data, arity)
        if ops is None:
            return
        before = [snapshot(e.carrier) for e in ops]
        ts = [e.tensor for e in ops]
        with np.errstate(all="ignore"):
            if op == "add":
                result, expect = (sw.add(*ts) if data.draw(st.booleans()) else ts[0] + ts[1]), ops[0].values + ops[1].values
            elif op == "mul":
                result, expect = sw.mul(*ts), ops[0].values * ops[1].values
            elif op == "mul_number":
                k = data.draw(FACTORS)
                result, expect = sw.mul(ts[0], k), ops[0].values * np.float32(k)
            elif op == "relu":
                result, expect = sw.relu(ts[0]), np.maximum(ops[0].values, np.float32(0))
            else:
                result, expect = -ts[0], -ops[0].values
        assert type(result.carrier) is type(ops[0].carrier)
        assert result.dtype() is F32
        assert np.array_equal(np.array(result.tolist(), dtype=np.float32), expect), (result.tolist(), expect)
        assert [snapshot(e.carrier) for e in ops] == before
        self._pool_result(result, ops[0].kind, expect)

    @rule(data=st.data())
    def reduce(self, data):
        ops = self._op_operands(data, 1)
        if ops is None:
            return
        e = ops[0]
        s = sw.reduce_sum(e.tensor)
        assert s.size() == 1 and s.layout == sw.Layout(sw.Shape(), sw.Stride())
        exact = float(np.sum(e.values.astype(np.float64)))
        bound = 1e-6 * (self.n + 1) * float(np.sum(np.abs(e.values.astype(np.float64))))
        assert abs(s.item() - exact) <= bound, (s.item(), exact)

    @rule(data=st.data(), fault=st.sampled_from(("class", "dtype", "released", "file")))
    def op_refused(self, data, fault):
        f = data.draw(st.sampled_from((sw.add, sw.mul)))
        a = data.draw(st.sampled_from(self.live(lambda e: e.kind in ("cpu", "generic") and e.dtype is F32) or [None]))
        if a is None:
            return
        if fault == "class":
            other = make_carrier("generic" if a.kind == "cpu" else "cpu", F32, self.n, [0.0] * self.n)
            exc, frag, b = TypeError, "one carrier class", sw.Tensor(other, 0, flat(self.n))
        elif fault == "dtype":
            other = make_carrier(a.kind, I32, self.n, [0] * self.n)
            exc, frag, b = TypeError, "one dtype", sw.Tensor(other, 0, flat(self.n))
        elif fault == "released":
            rel = self.released()
            rel = [r for r in rel if r.kind == a.kind and r.dtype is F32]
            if not rel:
                return
            exc, frag, b = RuntimeError, "released", data.draw(st.sampled_from(rel)).tensor
        else:
            files = self.live(lambda e: e.kind == "file" and e.dtype is F32)
            if not files:
                return
            exc, frag, b = TypeError, "CPU and Generic", data.draw(st.sampled_from(files)).tensor
            a_tensor = b
            raises(exc, frag, sw.relu, a_tensor)
        before = snapshot(a.carrier)
        args = (a.tensor, b) if data.draw(st.booleans()) else (b, a.tensor)
        raises(exc, frag, f, *args)
        assert snapshot(a.carrier) == before

    # ------------------------------------------------------------ backward

    @rule(data=st.data(), then=st.sampled_from(("plain", "plain", "foreign_write", "slot_write", "retain")))
    def backward(self, data, then):
        kind = data.draw(st.sampled_from(("cpu", "generic")))
        cands = self.live(lambda e: e.kind == kind and e.dtype is F32)
        if not cands:
            return
        k = data.draw(st.integers(1, min(3, len(cands))))
        entries = data.draw(st.permutations(cands))[:k]
        leaves = [sw.Tensor(e.carrier, 0, flat(self.n)) for e in entries]   # fresh: no old .grad
        versions = [e.carrier.version for e in entries]

        # forward, recorded for the model: node = (op, operand refs, k)
        vals = {("leaf", j): entries[j].values.copy() for j in range(k)}
        x, xref = leaves[0], ("leaf", 0)
        nodes = []
        for step in range(data.draw(st.integers(1, 4))):
            op = data.draw(st.sampled_from(("add", "mul", "mul_number", "relu")))
            with np.errstate(all="ignore"):
                if op in ("add", "mul"):
                    j = data.draw(st.integers(0, k - 1))
                    pair = [(x, xref), (leaves[j], ("leaf", j))]
                    if data.draw(st.booleans()):
                        pair.reverse()
                    (p, pref), (q, qref) = pair
                    x = sw.add(p, q) if op == "add" else sw.mul(p, q)
                    v = vals[pref] + vals[qref] if op == "add" else vals[pref] * vals[qref]
                    nodes.append((op, (pref, qref), None))
                elif op == "mul_number":
                    f = data.draw(FACTORS)
                    x, v = sw.mul(x, f), vals[xref] * np.float32(f)
                    nodes.append((op, (xref,), f))
                else:
                    x, v = sw.relu(x), np.maximum(vals[xref], np.float32(0))
                    nodes.append((op, (xref,), None))
            xref = ("node", len(nodes) - 1)
            vals[xref] = v
            assert np.array_equal(np.array(x.tolist(), dtype=np.float32), v)
        s = sw.reduce_sum(x)
        assert s.autograd_ctx is not None

        used = {ref for _, refs, _ in nodes for ref in refs}
        if then == "slot_write":
            # a leaf some node saved: its version token no longer matches
            j = data.draw(st.sampled_from(sorted(r[1] for r in used if r[0] == "leaf")))
            i = data.draw(st.integers(0, self.n - 1))
            w = data.draw(F32_VALUES)
            entries[j].carrier[i] = w
            entries[j].values[i] = w
            entries[j].version += 1
            raises(RuntimeError, "modified in-place", s.backward)
            return
        if then == "foreign_write" and kind == "cpu":
            # spec "Miss a foreign write during backward": no error, and the
            # gradient reflects the modified storage (mul reads saved inputs
            # from storage at backward time).
            j = data.draw(st.integers(0, k - 1))
            i = data.draw(st.integers(0, self.n - 1))
            w = data.draw(F32_VALUES)
            np.from_dlpack(leaves[j])[i] = w
            entries[j].values[i] = w
            vals.update({("leaf", jj): entries[jj].values.copy() for jj in range(k)})

        event(f"backward {kind} then={then} nodes={len(nodes)}")
        expect, bound = self._model_grads(nodes, vals, k)
        s.backward(retain_graph=(then == "retain"))
        for j in range(k):
            g = leaves[j].grad
            if ("leaf", j) not in used:
                assert g is None, "a leaf outside the graph gets no gradient"
                continue
            assert g is not None and type(g.carrier) is type(entries[j].carrier)
            assert g.layout == leaves[j].layout
            got = np.array(g.tolist(), dtype=np.float64)
            assert np.all(np.abs(got - expect[j]) <= 1e-5 * bound[j]), (j, got, expect[j], nodes)
            assert entries[j].carrier.version == versions[j], "backward must not write its leaves"
        if then == "retain":
            first = [np.array(leaf.grad.tolist()) for leaf in leaves if leaf.grad is not None]
            s.backward()
            for leaf, f in zip([leaf for leaf in leaves if leaf.grad is not None], first):
                assert np.array_equal(np.array(leaf.grad.tolist()), 2 * f)
        raises(RuntimeError, "retain_graph=True", s.backward)

    def _model_grads(self, nodes, vals, k):
        """Reverse pass of the recorded chain in float64, plus the same pass
        over absolute values (the scale a float32 rounding bound needs). Leaf
        values are read as they are now, like the engine's saved-input reads."""
        n = self.n
        grads = {("leaf", j): np.zeros(n) for j in range(k)}
        scale = {("leaf", j): np.zeros(n) for j in range(k)}
        g, a = {("node", len(nodes) - 1): np.ones(n)}, {("node", len(nodes) - 1): np.ones(n)}
        grads.update(g)
        scale.update(a)

        def val(ref):
            return vals[ref].astype(np.float64)

        for idx in range(len(nodes) - 1, -1, -1):
            op, refs, f = nodes[idx]
            gn, an = grads[("node", idx)], scale[("node", idx)]
            if op == "add":
                contrib = [(refs[0], gn, an), (refs[1], gn, an)]
            elif op == "mul":
                contrib = [(refs[0], gn * val(refs[1]), an * np.abs(val(refs[1]))),
                           (refs[1], gn * val(refs[0]), an * np.abs(val(refs[0])))]
            elif op == "mul_number":
                contrib = [(refs[0], gn * f, an * abs(f))]
            else:
                mask = val(refs[0]) > 0
                contrib = [(refs[0], gn * mask, an * mask)]
            for ref, gg, aa in contrib:
                grads[ref] = grads.get(ref, np.zeros(n)) + gg
                scale[ref] = scale.get(ref, np.zeros(n)) + aa
        return ([grads[("leaf", j)] for j in range(k)],
                [scale[("leaf", j)] + 1e-30 for j in range(k)])

    # ------------------------------------------------------------ invariants

    @invariant()
    def carriers_match_model(self):
        for e in self.entries:
            c = e.carrier
            if e.released:
                assert c.is_released() and c.size() == 0, e
                continue
            assert not c.is_released() and c.size() == self.n, e
            assert c.version == e.version, (e, c.version)
            got = np.array(e.tensor.tolist(), dtype=np_dtype(e.dtype))
            assert np.array_equal(got, e.values), (e, got)

    @invariant()
    def views_match_model(self):
        for e, view, scribbled in self.views:
            if not e.released:
                assert np.array_equal(view, e.values), (e, view)
            elif not scribbled:
                event("view of released storage checked")
                assert not np.any(view), f"view of released storage must read zeros: {view}"

    def teardown(self):
        self.views.clear()
        for e in self.entries:
            e.carrier.release()


class _grad:
    """Grad mode on or off for a block (moves with it on need a reverse route)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.prev = sw.is_grad_enabled()
        sw.set_grad_enabled(self.on)

    def __exit__(self, *exc):
        sw.set_grad_enabled(self.prev)


StrideWeaveMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestStateful = StrideWeaveMachine.TestCase
