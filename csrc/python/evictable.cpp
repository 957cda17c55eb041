// Evictable: a two-tier carrier that owns both tiers (it holds their
// ownership tokens) and keeps its values in the primary while promoted and
// in the secondary while evicted.
//
// Residency changes are framework-owned ("lowered") moves between the tiers
// (move_lowered): the exact-pair route of the tiers' classes from the move
// registry (so CPU->FileBacked eviction is the registered bulk copy, and a
// registered custom operation for the pair is the one used), run
// synchronously, with no ownership claims, autograd node or profiling event.
// Storage lifecycle:
//   evict():   primary values -> secondary, then the primary is relinquished
//              and released. `primary` then names that released carrier. A
//              secondary too small for the values is fitted first: an empty
//              one grows to the primary's size; one that cannot grow, or a
//              non-empty one that is too small, is replaced by a fresh
//              mutable carrier of its class (secondary.allocate_like), and
//              the replaced one is relinquished and released once the
//              eviction succeeded.
//   promote(): fresh storage of the primary's exact class
//              (primary.allocate_like(n, empty=True)) is claimed, secondary
//              values -> it, and it becomes `primary`. The secondary keeps
//              its (now stale) copy, owned as before, and is reused by the
//              next eviction.
// A failed transition leaves the previous residency, tiers and values intact
// (a fresh primary or secondary is released again), so it can be retried. During a transition the Evictable owns
// itself, so writes, release and moves from other threads are refused.
//
// Decisions where the contract is silent:
//   - A write through a promoted Evictable adds 1 to the Evictable's version
//     only; the tier's version counts public writes through the tier, and
//     there are none (an owned tier is not publicly mutable).
//   - The Evictable is mutable when its primary was constructed mutable.
//   - size() is the primary's slot count while promoted and the secondary's
//     while evicted; dtype() is the tiers' common dtype.
//   - Reads and writes while evicted raise RuntimeError("... evicted ...").
//     A move out of or into an evicted Evictable therefore fails through
//     its handle; an Evictable is a usable move destination only while
//     promoted. It is fixed-size (an empty destination cannot grow).
//   - new_like / allocate_like build a fresh Evictable of the same class: the
//     primary from the primary's own new_like / allocate_like, the secondary
//     empty (secondary.allocate_like(0)) until the first eviction fits it.
//   - release() relinquishes and releases both tiers: their storage belonged
//     to the Evictable, and the caller's references to the tiers then name
//     unowned, released carriers (a clear RuntimeError on use, never a
//     crash). A tier still owned by another party (a pending move) is
//     relinquished by the Evictable but not released.
//   - Garbage collection of an Evictable that was not released only
//     relinquishes its ownership of the tiers: a caller still holding a tier
//     gets it back live and usable (the values are in the primary while
//     promoted, in the secondary while evicted); a tier nobody holds dies
//     with its last reference, as any carrier does.
//   - Construction resolves both edges (primary->secondary and back) and
//     checks their pins; when a tier is a Metal carrier both edges must be
//     registered operations (not the elementwise fallback), else
//     NotImplementedError. All of this happens before either tier is claimed.
//     The secondary's size is no construction rule: eviction fits it.
#include <new>

#include "carriers/evictable_state.hpp"
#include "dtype_object.hpp"
#include "layout_object.hpp"
#include "carrier_object.hpp"
#include "tensor_object.hpp"
#include "move/move.hpp"
#include "autograd/autograd.hpp"
#include "module.hpp"
#include "util/ref.hpp"
#include "util/errors.hpp"
#include "util/type_object.hpp"

namespace swpy {

namespace E = sw::evictable;

struct EvictableObject {
  CarrierObject base;
  PyObject* primary;
  PyObject* secondary;
  E::Residency state;  // residency, tokens held on the tiers, slots, dtype
};

namespace {

EvictableObject* as_ev(PyObject* o) { return reinterpret_cast<EvictableObject*>(o); }
EvictableObject* as_ev(CarrierObject* o) { return reinterpret_cast<EvictableObject*>(o); }
PyObject* tier_of(EvictableObject* o, E::Tier t) { return t == E::Tier::Primary ? o->primary : o->secondary; }

int raise_evicted(PyObject* self) {
  PyErr_Format(PyExc_RuntimeError,
               "%s carrier is evicted: its values live in the secondary tier; call promote() before reading or "
               "writing them",
               type_name(self));
  return -1;
}

// Gives a tier back and releases it, reporting (not raising) a failure of a
// Python release hook: this runs from release() and from deallocation.
void drop_tier(EvictableObject* o, E::Tier t) {
  PyObject* tier = tier_of(o, t);
  if (!tier) return;
  ErrorGuard keep;
  const int64_t token = o->state.take_token(t);
  if (token && carrier_relinquish(tier, token) < 0) PyErr_WriteUnraisable(tier);
  if (!carrier_is_owned(tier) && carrier_release(tier) < 0) PyErr_WriteUnraisable(tier);
}

void drop_tiers(EvictableObject* o) {
  drop_tier(o, E::Tier::Primary);
  drop_tier(o, E::Tier::Secondary);
}

// Gives both tiers back without releasing them (garbage collection).
void relinquish_tiers(EvictableObject* o) {
  ErrorGuard keep;
  for (E::Tier t : {E::Tier::Primary, E::Tier::Secondary}) {
    PyObject* tier = tier_of(o, t);
    const int64_t token = o->state.take_token(t);
    if (tier && token && carrier_relinquish(tier, token) < 0) PyErr_WriteUnraisable(tier);
  }
}

// Gives up a claimed carrier the Evictable made for itself (a fresh tier
// that a failed transition does not keep): relinquish, release, drop.
void discard(Ref* fresh, int64_t token) {
  if (!*fresh) return;
  ErrorGuard keep;
  if (token && carrier_relinquish(fresh->get(), token) < 0) PyErr_Clear();
  if (carrier_release(fresh->get()) < 0) PyErr_Clear();
  fresh->reset();
}

// A Tensor over slots [0, n) of carrier in the canonical one-mode layout.
PyObject* whole(PyObject* carrier, Py_ssize_t n) {
  Ref layout = Ref::steal(
      engine_new([&] { return layout_from_engine(sw::Layout::canonical(sw::IntTree::node({sw::IntTree::leaf(n)}))); }));
  if (!layout) return nullptr;
  return tensor_new(carrier, 0, layout.get());
}

// Copies slots [0, n) of the tier from into to (a lowered move of the whole
// range, through the tokens that own them). 0 / -1.
int copy_tier(PyObject* from, int64_t from_token, PyObject* to, int64_t to_token, Py_ssize_t n) {
  Ref t = Ref::steal(whole(from, n));
  return t && Ref::steal(move_lowered(t.get(), to, from_token, to_token)) ? 0 : -1;
}

// The Evictable owns itself for the duration of a transition. 0 / -1.
int lock(PyObject* self, const char* what, int64_t* token) {
  if (as_carrier(self)->released) {
    PyErr_Format(PyExc_RuntimeError, "cannot %s: the %s carrier is released", what, type_name(self));
    return -1;
  }
  if (carrier_is_owned(self)) {
    PyErr_Format(PyExc_RuntimeError,
                 "cannot %s: the %s carrier is owned by another carrier, a pending move or a transition in progress",
                 what, type_name(self));
    return -1;
  }
  *token = carrier_claim(self);
  return *token ? 0 : -1;
}

void unlock(PyObject* self, int64_t token) {
  ErrorGuard keep;
  if (carrier_relinquish(self, token) < 0) PyErr_Clear();
}

// The tiers are gone only after a garbage-collector clear or before
// __init__; methods then raise instead of touching them.
int check_tiers(PyObject* self) {
  EvictableObject* o = as_ev(self);
  if (o->state.attached() && o->primary && o->secondary) return 0;
  PyErr_Format(PyExc_RuntimeError, "%s is not initialised", type_name(self));
  return -1;
}

// ------------------------------------------------------------------ vtable

sw::DTypeCode vt_dtype_code(CarrierObject* o) { return as_ev(o)->state.dtype(); }

Py_ssize_t vt_size(CarrierObject* c) {
  EvictableObject* o = as_ev(c);
  PyObject* tier = tier_of(o, o->state.resident());
  return tier ? carrier_size(tier) : 0;
}

PyObject* vt_get(CarrierObject* c, Py_ssize_t i) {
  EvictableObject* o = as_ev(c);
  if (o->state.evicted()) {
    raise_evicted(reinterpret_cast<PyObject*>(c));
    return nullptr;
  }
  return carrier_get(o->primary, i);
}

// The base has checked the Evictable's own mutability and bumps its version.
int vt_set(CarrierObject* c, Py_ssize_t i, PyObject* v) {
  EvictableObject* o = as_ev(c);
  if (o->state.evicted()) return raise_evicted(reinterpret_cast<PyObject*>(c));
  return carrier_set_unchecked(o->primary, i, v);
}

void vt_release(CarrierObject* c) {
  // Released before the tiers' hooks run (Python code): a move's commit
  // has already given its ownership back, so another thread must not be
  // able to write or move this carrier meanwhile.
  c->released = true;
  drop_tiers(as_ev(c));
}

PyObject* make_evictable(PyTypeObject* type, PyObject* primary, PyObject* secondary);

// Fresh tiers from the tiers' own hooks, then a fresh Evictable of the
// receiver's exact class over them.
PyObject* like(CarrierObject* c, PyObject* values, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  EvictableObject* o = as_ev(c);
  if (check_tiers(reinterpret_cast<PyObject*>(c)) < 0) return nullptr;
  Ref p = Ref::steal(values ? carrier_new_like(o->primary, values, mutable_, dtype)
                           : carrier_allocate_like(o->primary, n, mutable_, dtype, empty));
  if (!p) return nullptr;
  if (values) {
    n = carrier_size(p.get());
    if (n < 0) return nullptr;
  }
  // The secondary stays empty until the first eviction fits it.
  Ref s = Ref::steal(carrier_allocate_like(o->secondary, 0, true, dtype, true));
  return s ? make_evictable(Py_TYPE(c), p.get(), s.get()) : nullptr;
}

PyObject* vt_new_like(CarrierObject* c, PyObject* values, bool mutable_, PyObject* dtype) {
  return like(c, values, 0, mutable_, dtype, false);
}

PyObject* vt_allocate_like(CarrierObject* c, Py_ssize_t n, bool mutable_, PyObject* dtype, bool empty) {
  return like(c, nullptr, n, mutable_, dtype, empty);
}


PyObject* vt_dlpack_info(CarrierObject* c) {
  PyErr_Format(PyExc_BufferError,
               "DLPack is not supported for Evictable carriers (%s): its values move between tiers, so it has no "
               "stable storage to export",
               type_name(reinterpret_cast<PyObject*>(c)));
  return nullptr;
}

const CarrierVTable evictable_vt = {
    vt_dtype_code, vt_size, vt_get, vt_set, vt_release, vt_new_like, vt_allocate_like,
    nullptr /* reserve: sized by its tiers */, nullptr /* host_data: values may move */, vt_dlpack_info,
};

// ------------------------------------------------------------ construction

// Raises the violation v of the construction rules. -1.
int raise_violation(E::Violation v, PyObject* p, PyObject* s, PyObject* pd = nullptr, PyObject* sd = nullptr) {
  PyObject* tier = v.tier == E::Tier::Primary ? p : s;
  const char* role = E::role(v.tier);
  switch (v.rule) {
    case E::Rule::NotDistinct:
      PyErr_SetString(PyExc_ValueError, "Evictable primary and secondary must be distinct carriers");
      break;
    case E::Rule::Released:
      PyErr_Format(PyExc_RuntimeError, "Evictable %s %s carrier is released", role, type_name(tier));
      break;
    case E::Rule::Owned:
      PyErr_Format(PyExc_RuntimeError, "Evictable %s %s carrier is already owned by another carrier or a pending move",
                   role, type_name(tier));
      break;
    case E::Rule::DtypeMismatch:
      PyErr_Format(PyExc_TypeError, "Evictable tiers must have identical dtype: primary is %R, secondary is %R", pd,
                   sd);
      break;
    case E::Rule::DtypeNotSimple:
      PyErr_Format(PyExc_TypeError, "Evictable tiers need a built-in simple dtype, not %R", pd);
      break;
    case E::Rule::SecondaryImmutable:
      PyErr_Format(PyExc_RuntimeError, "Evictable secondary %s carrier must be mutable (eviction writes into it)",
                   type_name(s));
      break;
    case E::Rule::PrimaryEmpty:
      PyErr_Format(PyExc_ValueError, "Evictable primary %s carrier must be non-empty", type_name(p));
      break;
    case E::Rule::EdgeNotRegistered:
    case E::Rule::Ok:
      PyErr_SetString(PyExc_SystemError, "unexpected Evictable rule violation");
      break;
  }
  return -1;
}

// One edge between the tiers: resolvable, pins matching, and allowed by the
// edge rule.
int check_edge(const E::Validator& rules, PyTypeObject* src, PyTypeObject* dst, bool metal) {
  Ref op = Ref::steal(move_resolve_route(src, dst));
  if (!op) return -1;
  if (move_check_pins(op.get(), src, dst) < 0) return -1;
  if (rules.edge(metal, op.get() == reinterpret_cast<PyObject*>(&ElementwiseMoveOperation_Type))) {
    PyErr_Format(PyExc_NotImplementedError,
                 "an Evictable with a Metal tier needs a registered move operation for every edge, and none is "
                 "registered for (%s, %s)",
                 type_name(src), type_name(dst));
    return -1;
  }
  return 0;
}

// Every check of the constructor, in the engine's order, each fact asked
// for just before its rule. 0 / -1.
int validate(PyObject* p, PyObject* s, Py_ssize_t* slots, sw::DTypeCode* dtype, int* primary_mutable) {
  const char* role[2] = {"primary", "secondary"};
  PyObject* tier[2] = {p, s};
  for (int k = 0; k < 2; ++k) {
    if (!is_carrier(tier[k])) {
      PyErr_Format(PyExc_TypeError, "Evictable %s must be a Carrier, not %.100s", role[k], type_name(tier[k]));
      return -1;
    }
  }
  E::Validator rules;
  E::Violation v = rules.identity(p == s, {carrier_is_released(p) != 0, carrier_is_owned(p) != 0},
                                  {carrier_is_released(s) != 0, carrier_is_owned(s) != 0});
  if (v) return raise_violation(v, p, s);
  Ref pd = Ref::steal(carrier_dtype(p));
  if (!pd) return -1;
  Ref sd = Ref::steal(carrier_dtype(s));
  if (!sd) return -1;
  const int same = PyObject_RichCompareBool(pd.get(), sd.get(), Py_EQ);
  if (same < 0) return -1;
  v = rules.dtypes(same != 0, dtype_singleton(dtype_code(pd.get())) != nullptr);
  if (v) return raise_violation(v, p, s, pd.get(), sd.get());
  *dtype = dtype_code(pd.get());
  const int m = carrier_is_mutable(s);
  if (m < 0) return -1;
  if ((v = rules.secondary_mutable(m != 0))) return raise_violation(v, p, s);
  *primary_mutable = carrier_is_mutable(p);
  if (*primary_mutable < 0) return -1;
  const Py_ssize_t n = carrier_size(p);
  if (n < 0) return -1;
  if ((v = rules.primary_size(n))) return raise_violation(v, p, s);
  const bool metal = PyObject_TypeCheck(p, &Metal_Type) || PyObject_TypeCheck(s, &Metal_Type);
  if (check_edge(rules, Py_TYPE(p), Py_TYPE(s), metal) < 0 || check_edge(rules, Py_TYPE(s), Py_TYPE(p), metal) < 0)
    return -1;
  *slots = rules.slots();
  return 0;
}

// Validates, then claims both tiers. 0 / -1 (nothing claimed on failure).
int setup(PyObject* self, PyObject* p, PyObject* s) {
  EvictableObject* o = as_ev(self);
  if (o->state.attached() || as_carrier(self)->released) {
    PyErr_SetString(PyExc_RuntimeError, "Evictable.__init__() cannot be called twice");
    return -1;
  }
  Py_ssize_t slots = 0;
  sw::DTypeCode dtype = sw::DTypeCode::Float32;
  int primary_mutable = 0;
  if (validate(p, s, &slots, &dtype, &primary_mutable) < 0) return -1;
  int64_t pt = carrier_claim(p);
  if (!pt) return -1;
  int64_t st = carrier_claim(s);
  if (!st) {
    ErrorGuard keep;
    carrier_relinquish(p, pt);
    return -1;
  }
  o->primary = Py_NewRef(p);
  o->secondary = Py_NewRef(s);
  o->state.attach(pt, st, slots, dtype);
  o->base.constructed_mutable = primary_mutable != 0;
  return 0;
}

PyObject* Evictable_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = carrier_alloc(type, &evictable_vt);
  if (!self) return nullptr;
  EvictableObject* o = as_ev(self);
  o->primary = nullptr;
  o->secondary = nullptr;
  new (&o->state) E::Residency();
  return self;
}

PyObject* make_evictable(PyTypeObject* type, PyObject* primary, PyObject* secondary) {
  Ref args = Ref::steal(PyTuple_New(0));
  if (!args) return nullptr;
  Ref self = Ref::steal(type->tp_new(type, args.get(), nullptr));
  if (!self) return nullptr;
  if (!PyObject_TypeCheck(self.get(), &Evictable_Type)) {
    PyErr_Format(PyExc_TypeError, "%s.__new__ did not return an Evictable", type->tp_name);
    return nullptr;
  }
  if (setup(self.get(), primary, secondary) < 0) return nullptr;
  return self.release();
}

int Evictable_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"primary", "secondary", nullptr};
  PyObject *p, *s;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Evictable", const_cast<char**>(kw), &p, &s)) return -1;
  return setup(self, p, s);
}

int Evictable_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(as_ev(self)->primary);
  Py_VISIT(as_ev(self)->secondary);
  return 0;
}

// Collected (in a cycle or not) without release(): the tiers are given back,
// live, to whoever still holds them.
int Evictable_clear(PyObject* self) {
  EvictableObject* o = as_ev(self);
  relinquish_tiers(o);
  Py_CLEAR(o->primary);
  Py_CLEAR(o->secondary);
  return 0;
}

void Evictable_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  Evictable_clear(self);
  carrier_dealloc(self);
}

// ------------------------------------------------------------ methods

// The carrier eviction copies into, fitted to the values (sw::evictable::
// fit_secondary): the secondary itself, grown first when it is empty and
// can grow; else a fresh mutable carrier of its class, claimed, in *fresh
// with its token. 0 / -1 (nothing claimed on failure).
int eviction_target(EvictableObject* o, Ref* fresh, int64_t* fresh_token) {
  const Py_ssize_t slots = o->state.slots();
  const Py_ssize_t sn = carrier_size(o->secondary);
  if (sn < 0) return -1;
  E::SecondaryFit fit = E::fit_secondary(sn, slots);
  if (fit == E::SecondaryFit::Fits) return 0;
  if (fit == E::SecondaryFit::Grow) {
    const int grown = carrier_reserve(o->secondary, slots);
    if (grown < 0) return -1;
    if (grown > 0) return 0;
  }
  Ref f = Ref::steal(carrier_allocate_like(o->secondary, slots, true, nullptr, true));
  if (!f) return -1;
  const int64_t token = carrier_claim(f.get());
  if (!token) {
    discard(&f, 0);
    return -1;
  }
  *fresh = std::move(f);
  *fresh_token = token;
  return 0;
}

PyObject* Evictable_evict(PyObject* self, PyObject*) {
  EvictableObject* o = as_ev(self);
  if (check_tiers(self) < 0) return nullptr;
  int64_t me;
  if (lock(self, "evict", &me) < 0) return nullptr;
  if (o->state.evicted()) {
    unlock(self, me);
    Py_RETURN_NONE;
  }
  Ref fresh;
  int64_t fresh_token = 0;
  if (eviction_target(o, &fresh, &fresh_token) < 0) {
    unlock(self, me);
    return nullptr;
  }
  PyObject* target = fresh ? fresh.get() : o->secondary;
  const int64_t target_token = fresh ? fresh_token : o->state.token(E::Tier::Secondary);
  if (copy_tier(o->primary, o->state.token(E::Tier::Primary), target, target_token, o->state.slots()) < 0) {
    discard(&fresh, fresh_token);
    unlock(self, me);
    return nullptr;
  }
  // The values are in the target: give the primary's storage up. A failing
  // release hook keeps it (claimed again), still promoted, with the
  // secondary it had.
  if (carrier_relinquish(o->primary, o->state.token(E::Tier::Primary)) < 0 || carrier_release(o->primary) < 0) {
    {
      ErrorGuard keep;
      if (!carrier_is_owned(o->primary) && !carrier_is_released(o->primary))
        o->state.reclaimed_primary(carrier_claim(o->primary));  // 0 (error cleared) when the claim failed
    }
    discard(&fresh, fresh_token);
    unlock(self, me);
    return nullptr;
  }
  if (fresh) {
    // The fresh secondary holds the values: the replaced one is given up.
    Ref replaced = Ref::steal(o->secondary);
    const int64_t replaced_token = o->state.token(E::Tier::Secondary);
    o->secondary = fresh.release();
    o->state.replaced_secondary(fresh_token);
    ErrorGuard keep;
    if (replaced_token && carrier_relinquish(replaced.get(), replaced_token) < 0) PyErr_WriteUnraisable(self);
    if (!carrier_is_owned(replaced.get()) && carrier_release(replaced.get()) < 0) PyErr_WriteUnraisable(self);
  }
  o->state.evicted_primary_released();
  unlock(self, me);
  Py_RETURN_NONE;
}

PyObject* Evictable_promote(PyObject* self, PyObject*) {
  EvictableObject* o = as_ev(self);
  if (check_tiers(self) < 0) return nullptr;
  int64_t me;
  if (lock(self, "promote", &me) < 0) return nullptr;
  if (!o->state.evicted()) {
    unlock(self, me);
    Py_RETURN_NONE;
  }
  // Fresh primary storage of the exact class (mutable: the Evictable keeps
  // its own mutability; the tier is owned and never publicly writable).
  Ref fresh = Ref::steal(carrier_allocate_like(o->primary, o->state.slots(), true, nullptr, true));
  const int64_t ft = fresh ? carrier_claim(fresh.get()) : 0;
  if (!ft || copy_tier(o->secondary, o->state.token(E::Tier::Secondary), fresh.get(), ft, o->state.slots()) < 0) {
    discard(&fresh, ft);
    unlock(self, me);
    return nullptr;
  }
  Py_SETREF(o->primary, fresh.release());
  o->state.promoted(ft);
  unlock(self, me);
  Py_RETURN_NONE;
}

PyObject* Evictable_is_evicted(PyObject* self, PyObject*) { return PyBool_FromLong(as_ev(self)->state.evicted()); }

}  // namespace

PyObject* evictable_value_tier(PyObject* evictable) {
  EvictableObject* o = as_ev(evictable);
  if (o->base.released) return nullptr;
  return o->state.evicted() ? o->secondary : o->primary;
}

namespace {

PyObject* tier_or_none(PyObject* tier) { return tier ? Py_NewRef(tier) : Py_NewRef(Py_None); }
PyObject* Evictable_get_primary(PyObject* self, void*) { return tier_or_none(as_ev(self)->primary); }
PyObject* Evictable_get_secondary(PyObject* self, void*) { return tier_or_none(as_ev(self)->secondary); }

PyMethodDef Evictable_methods[] = {
    {"evict", Evictable_evict, METH_NOARGS,
     "Move the values into the secondary through the exact-pair move route, then release the primary's "
     "storage. An empty secondary grows; one too small that cannot grow is replaced by a fresh mutable carrier "
     "of its class (secondary.allocate_like), and the replaced one is released. No-op when already evicted. On "
     "failure the Evictable stays promoted with its tiers and values, and eviction can be retried."},
    {"promote", Evictable_promote, METH_NOARGS,
     "Allocate fresh primary storage of the primary's exact class and move the values back into it. No-op "
     "when promoted. On failure the Evictable stays evicted with its values."},
    {"is_evicted", Evictable_is_evicted, METH_NOARGS, "True while the values live in the secondary."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef Evictable_getset[] = {
    {"primary", Evictable_get_primary, nullptr,
     "The primary tier: the supplied carrier until the first eviction, released while evicted, and the freshly "
     "allocated carrier of the same class after each promotion. Owned: read-only to everyone else.",
     nullptr},
    {"secondary", Evictable_get_secondary, nullptr,
     "The secondary tier: the supplied carrier, or the fresh one an eviction replaced a too-small one with. "
     "Owned: read-only to everyone else.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject Evictable_Type = static_type("strideweave.Evictable", sizeof(EvictableObject));

int evictable_module_init(PyObject* module) {
  Evictable_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  Evictable_Type.tp_doc =
      "Evictable(primary, secondary)\n\n"
      "A two-tier carrier that owns both tiers: values live in primary while promoted and in secondary while "
      "evicted. evict() moves them into the secondary through the exact-pair move route of the tiers' classes "
      "and releases the primary's storage; an empty secondary grows, and one too small that cannot grow is "
      "replaced by a fresh mutable carrier of its class (secondary.allocate_like; the replaced one is "
      "released). promote() allocates fresh storage of the primary's exact class and moves them back "
      "(`primary` is then that new carrier). A failed transition keeps the previous residency, tiers and "
      "values, and can be retried.\n\n"
      "Tiers must be distinct (ValueError), live (RuntimeError), unowned (RuntimeError), Carriers (TypeError) of "
      "identical dtype (TypeError); the secondary mutable (RuntimeError); the primary non-empty (ValueError). A "
      "Metal tier needs registered move operations for both "
      "edges (NotImplementedError). Nothing is claimed unless every check passes.\n\n"
      "Reads and writes while evicted raise RuntimeError ('evicted'). A write through a promoted Evictable adds 1 "
      "to the Evictable's version (not the tier's). The tiers are owned, so they are not publicly mutable and "
      "export read-only; the Evictable itself refuses DLPack in both residencies. size() follows the residency. "
      "release() relinquishes and releases both tiers: their storage belonged to the Evictable, so a caller "
      "still holding a tier sees an unowned, released carrier (RuntimeError 'released' on use). Garbage "
      "collection without release() only relinquishes them: a tier the caller holds is live and usable again. "
      "new_like()/allocate_like() build the primary from the primary's hooks and leave the secondary empty "
      "until the first eviction. An Evictable is a move destination only while promoted.";
  Evictable_Type.tp_base = &Carrier_Type;
  Evictable_Type.tp_new = Evictable_new;
  Evictable_Type.tp_init = Evictable_init;
  Evictable_Type.tp_dealloc = Evictable_dealloc;
  Evictable_Type.tp_traverse = Evictable_traverse;
  Evictable_Type.tp_clear = Evictable_clear;
  Evictable_Type.tp_methods = Evictable_methods;
  Evictable_Type.tp_getset = Evictable_getset;
  return add_type(module, &Evictable_Type, "Evictable");
}

}  // namespace swpy
