"""Definition-backed carrier classes for the extension API tests: fresh
classes per test (the registry is process-global and a class is sealed
once observed), storage providers over a list or a bytearray, recording
transfer routes and a completion the test finishes."""
import struct
import threading

import strideweave as sw
from strideweave.carriers import extension as ext

from support.builders import F32, I32
from support.moves import WAIT

ZERO = {F32: 0.0, I32: 0, sw.DType.Bool: False}


class Log:
    """Counts storage-provider calls per carrier class."""

    def __init__(self):
        self.releases = []
        self.allocations = []


def list_storage(log=None, fallback=False, dtypes=(F32, I32)):
    """A StorageProvider keeping a carrier's slots in a Python list."""
    log = log if log is not None else Log()

    def allocate(c, n):
        log.allocations.append((c, n))
        c._slots = [ZERO[c.dtype()]] * n

    def release(c):
        log.releases.append(c)
        c._slots = []

    return ext.StorageProvider(
        supports_dtype=lambda c, dtype: dtype in dtypes,
        physical_size=lambda c: len(c.__dict__.get("_slots", ())),
        allocate=allocate,
        release=release,
        read=lambda c, i: c._slots[i],
        write=lambda c, i, v: c._slots.__setitem__(i, v),
        elementwise_fallback=fallback,
    )


def packed_storage(log=None, fallback=False):
    """A StorageProvider packing Float32/Int32 slots into a bytearray."""
    log = log if log is not None else Log()
    fmt = {F32: "f", I32: "i"}

    def allocate(c, n):
        log.allocations.append((c, n))
        c._buf = bytearray(4 * n)

    def release(c):
        log.releases.append(c)
        c._buf = bytearray()

    return ext.StorageProvider(
        supports_dtype=lambda c, dtype: dtype in fmt,
        physical_size=lambda c: len(c.__dict__.get("_buf", b"")) // 4,
        allocate=allocate,
        release=release,
        read=lambda c, i: struct.unpack_from(fmt[c.dtype()], c._buf, 4 * i)[0],
        write=lambda c, i, v: struct.pack_into(fmt[c.dtype()], c._buf, 4 * i, v),
        elementwise_fallback=fallback,
    )


def fresh(name, base=sw.Carrier):
    """A fresh, unobserved carrier class."""
    return type(name, (base,), {})


class RouteLog:
    """What the route providers of a test saw."""

    def __init__(self):
        self.prepared = []   # (route_id, TransferRequest)
        self.submitted = []  # route_id
        self.grad_modes = []  # (stage, is_grad_enabled())
        self.lock = threading.Lock()


def copy_span(request):
    """Bulk-copy the whole physical span (holes included) through the
    carriers' public slots: submit() runs with owner access to both."""
    src = request.tensor.carrier
    off = request.tensor.offset
    for i in range(request.physical_span):
        request.destination[i] = src[off + i]


def provider(route_id, log, result=lambda request: None, unsupported=None, prepare_error=None):
    """A TransferProvider that records its calls, copies the span in
    submit() and returns result(request) from it."""

    def prepare(request):
        log.prepared.append((route_id, request))
        log.grad_modes.append(("prepare", sw.is_grad_enabled()))
        if prepare_error is not None:
            raise prepare_error
        if unsupported is not None:
            return ext.Unsupported(unsupported)

        def submit():
            log.submitted.append(route_id)
            log.grad_modes.append(("submit", sw.is_grad_enabled()))
            copy_span(request)
            return result(request)

        return ext.PreparedTransfer(submit)

    return ext.TransferProvider(prepare)


def route(src, dst, route_id, log, **kw):
    return ext.TransferRoute(src, dst, route_id, provider(route_id, log, **kw))


def define(cls, storage, *routes):
    ext.register_carrier_definition(cls, ext.CarrierDefinition(storage, routes))
    return cls


def family(host_fallback=False, packed_fallback=False, host_to_packed=True, packed_to_host=True, **route_kw):
    """Fresh HostSlots (list) and PackedSlots (bytearray) classes with routes
    between them as requested. Returns (HostSlots, PackedSlots, RouteLog,
    storage Log)."""
    log, slog = RouteLog(), Log()
    Host, Packed = fresh("HostSlots"), fresh("PackedSlots")
    define(Host, list_storage(slog, host_fallback),
           *([route(Host, Packed, "host-to-packed", log, **route_kw)] if host_to_packed else []))
    define(Packed, packed_storage(slog, packed_fallback),
           *([route(Packed, Host, "packed-to-host", log)] if packed_to_host else []))
    return Host, Packed, log, slog


def filled(cls, vals, dtype=F32, size=None):
    c = cls(size if size is not None else len(vals), dtype=dtype)
    for i, v in enumerate(vals):
        c[i] = v
    return c


def tensor_of(cls, vals, dtype=F32, layout=None, offset=0, size=None):
    layout = layout if layout is not None else sw.Layout.canonical(sw.Shape([len(vals)]))
    c = filled(cls, vals, dtype, size)
    return sw.Tensor(c, offset, layout)


class HeldCompletion(ext.ProviderCompletion):
    """A ProviderCompletion the test finishes: done follows an Event; wait()
    blocks on it, then raises error (if any)."""

    def __init__(self, error=None):
        self.event = threading.Event()
        self.error = error
        self.wait_threads = []
        self.grad_modes = []

    @property
    def done(self):
        return self.event.is_set()

    def wait(self):
        self.wait_threads.append(threading.get_ident())
        self.grad_modes.append(sw.is_grad_enabled())
        assert self.event.wait(WAIT), "the test never finished the held completion"
        if self.error is not None:
            raise self.error
