// The TiledEvictable family: the carrier type (tiled_evictable.cpp) and
// what the direct operations and gradients (autograd/ops_tiled*.cpp) use of
// it. The rules (geometry, residency, request planning) are the engine's
// (csrc/engine/tiled/); this layer holds the carriers and the Python-facing
// checks.
#pragma once
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "carrier_object.hpp"
#include "move/move.hpp"
#include "tiled/geometry.hpp"
#include "tiled/requests.hpp"
#include "tiled/residency.hpp"
#include "util/ref.hpp"

namespace swpy {

extern PyTypeObject TiledEvictable_Type;
inline bool is_tiled(PyObject* o) { return Py_TYPE(o) == &TiledEvictable_Type; }

// One request between its registration and its end (tiled/requests.cpp).
struct TiledRequest {
  Ref te;
  sw::tiled::Plan plan;
  std::vector<std::pair<int64_t, PyObject*>> fresh;  // staged buffers (owned) by tile
  std::vector<bool> fresh_zero;                      // each known zero-filled
  std::unordered_map<int64_t, size_t> fresh_at;      // tile -> its index in fresh
  std::vector<std::pair<Ref, int64_t>> claims;      // carriers this request claimed
  std::vector<std::pair<PyObject*, int64_t>> access; // other owners' carriers its copies write
  Ref target, compact, out;                          // Place::Target, Compact, Out
  std::vector<int64_t> evict;                        // the policy's evictions, at commit
  std::function<PyObject*()> result;                 // the handle's value, at commit
  std::vector<Ref> keep;                             // what result() uses (borrowed there)
  Ref handle;                                        // the request's AwaitResult

  // The staged buffer of tile k, or NULL.
  PyObject* fresh_of(int64_t k, bool* zero = nullptr) const {
    auto it = fresh_at.find(k);
    if (it == fresh_at.end()) return nullptr;
    if (zero) *zero = fresh_zero[it->second];
    return fresh[it->second].second;
  }
};

// Everything a live TiledEvictable holds. Every carrier in it is claimed
// (tokens): the tiers, the tile buffers, the zero tile, the staging carrier.
struct TiledState {
  sw::tiled::Geometry geom;
  sw::tiled::Residency res;
  sw::DTypeCode dtype = sw::DTypeCode::Float32;
  Ref geometry_arg;  // what `geometry` returns: the kind's name or the Layout
  Ref proto;         // a carrier of the primary's exact class (allocate_like)
  Ref primary_class; // its class (kept after release)
  Ref slab;          // the full primary carrier while tiles live in it
  Ref secondary;
  Ref policy;
  Ref zeros;         // a packed tile of zeros (primary class)
  Ref stage;         // the kept staging carrier of projections into a caller's destination
  std::unordered_map<PyObject*, int64_t> tokens;
  std::vector<PyObject*> pool;    // freed tile buffers kept for promotions (owned)
  std::vector<PyObject*> doomed;  // freed while a slot read was running (owned)
  std::vector<PyObject*> retired; // replaced tiers, released with the carrier (owned)
  std::vector<TiledRequest*> pending;
  int reading = 0;  // slot reads in progress
  bool released = false;
  // The last full tensor checked (its layout object and offset) and its association.
  Ref last_layout;
  Py_ssize_t last_offset = 0;
  sw::tiled::Association last_assoc;
};

struct TiledObject {
  CarrierObject base;
  TiledState* s;  // NULL before __init__
};
inline TiledState& tiled_state(PyObject* te) { return *reinterpret_cast<TiledObject*>(te)->s; }

// ------------------------------------------------------------ arguments (tiled/args.cpp)
// Claims c for s (token kept). 0 / -1.
int tiled_claim(TiledState& s, PyObject* c);
// Relinquishes (when s holds its token) and releases c, a stolen reference.
void tiled_drop(TiledState& s, PyObject* c);
// A TileSet (or a TileSelection's tile set) bound to te's grid, as ordinals
// (TypeError for anything else, ValueError for rank and range). 0 / -1.
int tiled_tiles_arg(PyObject* te, PyObject* tiles, std::vector<int64_t>* out);
// A TileSelection bound to te's grid: its tiles in compact order and the
// compact grid (TypeError naming who, ValueError). 0 / -1.
int tiled_selection_arg(PyObject* te, PyObject* sel, const char* who, std::vector<int64_t>* tiles,
                        std::vector<int64_t>* cgrid);
// A TileSet of ordinals (ascending). New reference.
PyObject* tiled_tile_set(const sw::tiled::Geometry& g, const std::vector<int64_t>& ks);
// Ordinals of coordinates (a sequence of int tuples) bound to the grid, with
// the messages of `what`. 0 / -1.
int tiled_ordinals_of(const sw::tiled::Geometry& g, PyObject* coords, const char* what, std::vector<int64_t>* out);
// The constructor's arguments: an extent tuple (grid_shape, tile_shape);
// residency_policy (None or a ResidencyPolicy instance); geometry ("tiles",
// "dense", "row-major" or a Layout) over grid and tile into *out.
int tiled_extents_arg(PyObject* v, const char* name, std::vector<int64_t>* out);
int tiled_policy_arg(PyObject* p);
int tiled_geometry_arg(PyObject* g, const std::vector<int64_t>& grid, const std::vector<int64_t>& tile,
                       sw::tiled::Geometry* out);
// TypeError naming what is missing unless primary p and secondary s can
// serve as tiers: tiles move both ways between them and between primaries
// (as move resolves routes), and p has allocate_like().
int tiled_tier_routes(PyObject* p, PyObject* s);
// The compact input of scatter / assign (who: "scatter()", "assign()"): a
// live, unowned Tensor of te's dtype shaped like the selection (cgrid); its
// view over the compact grid in *cv.
int tiled_compact_arg(PyObject* te, const char* who, PyObject* compact, const std::vector<int64_t>& cgrid,
                      sw::tiled::CompactView* cv);
// project()'s destination: a live, mutable carrier of the primary's exact
// class and te's dtype with room for need slots (an empty one grows).
int tiled_check_destination(PyObject* te, PyObject* d, Py_ssize_t need);
// Runs req asynchronously; its handle (a fresh kind; an untimed wait() of
// an AwaitProjection runs the queued copies itself) completes with
// req->result() at commit. NULL with an exception (req ended).
PyObject* tiled_start(TiledRequest* req, PyTypeObject* kind);
// RuntimeError unless te is initialised and not released. 0 / -1.
int tiled_check_live(PyObject* te);
// A full tensor of te: TypeError (not a Tensor, another carrier),
// RuntimeError (released), ValueError (not tile-footprint compatible, the
// rule's message). *assoc (optional) receives its association. 0 / -1.
int tiled_check_tensor(PyObject* te, PyObject* tensor, const char* what, sw::tiled::Association* assoc);
// The primary tier's current carrier (borrowed): the slab, else an empty
// carrier of the primary's class (NULL once released).
PyObject* tiled_primary(PyObject* te);
// The primary's exact class: the compute class (borrowed; kept after release).
inline PyTypeObject* tiled_primary_class(PyObject* te) {
  return reinterpret_cast<PyTypeObject*>(reinterpret_cast<TiledObject*>(te)->s->primary_class.get());
}
// RuntimeError for a refused request (its tile named).
int tiled_raise_refusal(PyObject* te, const sw::tiled::Refusal& why, const char* what);
// Asks the residency policy (if any) for a plan of purpose over the
// required tiles (every tile when all): its promote, retain and evict
// tiles as ordinals (empty without a policy). 0 / -1 (TypeError for a
// result other than a ResidencyPlan, ValueError for tiles off the grid, or
// the policy's own exception).
struct PolicyPlan {
  std::vector<int64_t> promote, retain, evict;
};
int tiled_consult(PyObject* te, const char* purpose, const std::vector<int64_t>& required, bool all,
                  PolicyPlan* out);
// Stages a plan's fresh buffers, grows the secondary or makes the zero tile
// when the plan needs them, and registers it (as req). NULL with an
// exception, nothing registered.
TiledRequest* tiled_register(PyObject* te, sw::tiled::Plan&& plan);
// A span copy for a plan step (places mapped to req's carriers).
SpanCopy tiled_copy_of(TiledRequest* req, const sw::tiled::Step& st);
// Runs req's steps on this thread. 0 / -1.
int tiled_run_here(TiledRequest* req);
// Owner access for b's Python-level copies to the carriers they touch that
// te holds, and to req's claims (req may be NULL). 0 / -1.
int tiled_grant_access(SpanBatch& b, PyObject* te, TiledRequest* req);
// Ends req (which the caller then deletes): ok commits its changes and,
// with value, sets *value to req->result() (None without one) while req's
// claims still hold; then it unregisters, gives back what it staged and
// claimed, applies the policy's evictions (ok only) and what follows any
// request. A pending exception (the request's failure) is kept. 0, or -1
// when ok and result() failed.
int tiled_end(TiledRequest* req, bool ok, PyObject** value = nullptr);
// The zero of dtype as a Python value.
PyObject* tiled_zero(sw::DTypeCode dtype);
// Copies n slots from src to dst (slot 0 of each) on this thread through
// their route, with req's owner access. 0 / -1.
int tiled_copy_here(TiledRequest* req, PyObject* src, PyObject* dst, Py_ssize_t n);
// What follows any request or slot read: the policy evictions it deferred
// once nothing needs their tiles, the slab once no tile lives in it, the
// buffers freed during slot reads (none of it while a read is running).
void tiled_after_request(PyObject* te);
// A fresh TiledEvictable of te's geometry and tier classes: every tile
// implicit zero (implicit) or invalid, no storage yet.
PyObject* tiled_fresh(PyObject* te, bool implicit);
// te's full slab (zero-filled, claimed), allocated on first use. Borrowed.
PyObject* tiled_ensure_slab(PyObject* te);
// A tile buffer of the primary's class (new reference, claimed, packed
// tile size); *zero says it is known to be zero-filled.
PyObject* tiled_take_buffer(PyObject* te, bool* zero);
// Puts a freed tile buffer (stolen) back: pooled or released.
void tiled_recycle(PyObject* te, PyObject* buffer);

}  // namespace swpy
