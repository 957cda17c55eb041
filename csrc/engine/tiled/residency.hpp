// The residency state of a TiledEvictable: where each tile's value is,
// whether it is dirty, which private primary buffer holds it, and the
// pending requests that read or change tiles.
//
// One byte per tile (location, dirty, busy), in pages of kPageTiles tiles
// allocated when a tile of the page first changes (until then the page reads
// as the state every tile started in); everything else is kept only for
// tiles that need it (buffers of primary tiles outside the slab, counts of
// pending readers, the request changing a tile, retains and deferred
// evictions of residency policies). A carrier of 2^24 tiles costs at most
// 16 MiB of state, and constructing one of 2^31 tiles allocates none.
//
// Rules (tiled-carrier-composition):
// - A request registers the tiles it reads, the tiles whose residency it
//   changes (at most one request changes a tile) and the tiles its policy
//   plan retains; it commits its planned changes atomically, then
//   unregisters. A failed request unregisters without committing: nothing
//   changed.
// - Conflicts never wait: a residency request (promote, evict, flush) may
//   not touch a tile any pending request reads or changes; a data request
//   (projection, scatter, operation, backward, assign) may not touch a tile
//   a pending residency request changes. A policy's promotions inside a data
//   request are part of that request and no conflict for other readers.
// - A policy eviction of a tile that pending work still reads or retains is
//   deferred until that work is terminal.
// Not thread-safe: the binding calls it with the GIL held.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <algorithm>
#include <vector>

namespace sw::tiled {

enum class Location : uint8_t { Primary = 0, Secondary = 1, Implicit = 2, Invalid = 3 };
// "primary", "secondary", "implicit", "invalid".
const char* to_string(Location l);

// A private primary buffer of one tile (the binding's carrier object).
using Buffer = void*;

// One pending request's registration and its planned commit.
struct Request {
  // Residency: an explicit promote/evict/flush request; Data: anything else.
  enum class Kind : uint8_t { Residency, Data };
  struct Change {
    int64_t tile;
    Location location;
    bool dirty;
    // The tile's private primary buffer after the change: null keeps the
    // slab (a primary tile without a buffer lives in the slab); a tile that
    // stops being primary never keeps one.
    Buffer buffer;
    // The buffer is one the request stages (the binding fills buffer in
    // once it has it).
    bool fresh = false;
  };

  Kind kind = Kind::Data;
  bool reads_all = false;         // reads every tile (direct operations)
  std::vector<int64_t> reads;     // each tile once
  std::vector<int64_t> writes;    // tiles whose residency this request changes
  std::vector<int64_t> retains;   // tiles its plan keeps primary until it ends
  std::vector<Change> changes;    // applied by commit(), in order
  bool registered = false;
};

class Residency {
 public:
  static constexpr int kPageBits = 16;
  static constexpr int64_t kPageTiles = int64_t(1) << kPageBits;

  // n tiles, every one at loc with dirty; no buffers, no requests.
  void reset(int64_t n, Location loc, bool dirty);
  int64_t tiles() const { return tiles_; }

  Location location(int64_t k) const { return static_cast<Location>(byte(k) & kLoc); }
  bool dirty(int64_t k) const { return byte(k) & kDirty; }
  bool valid(int64_t k) const { return location(k) != Location::Invalid; }
  // Tile k's private primary buffer (null: in the slab, or not primary).
  Buffer buffer(int64_t k) const;
  int64_t count(Location l) const { return count_[static_cast<int>(l)]; }
  int64_t dirty_count() const { return dirty_count_; }
  // Primary tiles without a buffer: the slab holds them.
  int64_t slab_tiles() const { return count(Location::Primary) - static_cast<int64_t>(buffers_.size()); }
  // Every buffer in use (for release).
  std::vector<Buffer> buffers() const;

  // Sets tile k outright (slot writes, fresh results). The buffer it had,
  // when it no longer has it, goes to *freed.
  void set(int64_t k, Location loc, bool dirty, Buffer buffer, std::vector<Buffer>* freed);

  // ------------------------------------------------------------ requests
  int64_t pending() const { return pending_; }
  // A pending request reads tile k or changes its residency.
  bool busy(int64_t k) const { return all_readers_ > 0 || (byte(k) & kBusy); }
  int64_t readers(int64_t k) const;
  // The pending request changing tile k, or null.
  const Request* writer(int64_t k) const;
  // A pending explicit residency request changes tile k.
  bool in_residency_request(int64_t k) const;
  // Some tile is changed by a pending explicit residency request (O(1)).
  bool any_in_residency_request() const { return residency_writes_ > 0; }
  bool retained(int64_t k) const { return retained_.count(k) != 0; }

  // The first of tiles a residency request may not touch (busy), or -1.
  int64_t residency_conflict(const std::vector<int64_t>& tiles) const;
  // The first of tiles a data request may not touch, or -1 (all: every tile).
  int64_t data_conflict(const std::vector<int64_t>& tiles) const;
  int64_t data_conflict_all() const;
  // The first invalid tile of tiles, or -1 (all: every tile).
  int64_t first_invalid(const std::vector<int64_t>& tiles) const;
  int64_t first_invalid_all() const;

  // Counts r's reads, writes and retains (r must not be registered).
  void register_request(Request& r);
  // Applies r.changes (r still registered); buffers no tile uses any more go
  // to *freed.
  void commit(Request& r, std::vector<Buffer>* freed);
  // Drops r's registration (idempotent).
  void unregister(Request& r);

  // A policy eviction of tile k waiting for pending work to end.
  void defer(int64_t k) { deferred_.insert(k); }
  // Deferred tiles no pending request reads, changes or retains any more
  // (they leave the deferred set; the caller evicts those still primary).
  std::vector<int64_t> take_ready_deferred();
  size_t deferred() const { return deferred_.size(); }
  size_t retained_tiles() const { return retained_.size(); }

  // A forked child: the parent's requests are gone (their registrations
  // with them), the tiles stay as they were.
  void forget_requests();

  // The tiles whose location and dirtiness satisfy pred(loc, dirty), in
  // order (a page no tile of which changed is decided once).
  template <class Pred>
  std::vector<int64_t> where(Pred pred) const {
    std::vector<int64_t> out;
    for (size_t p = 0; p < pages_.size(); ++p) {
      const int64_t first = static_cast<int64_t>(p) << kPageBits;
      const int64_t n = std::min(kPageTiles, tiles_ - first);
      if (!pages_[p]) {
        if (pred(static_cast<Location>(fill_ & kLoc), (fill_ & kDirty) != 0))
          for (int64_t i = 0; i < n; ++i) out.push_back(first + i);
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t b = pages_[p][static_cast<size_t>(i)];
        if (pred(static_cast<Location>(b & kLoc), (b & kDirty) != 0)) out.push_back(first + i);
      }
    }
    return out;
  }

 private:
  static constexpr uint8_t kLoc = 0x3, kDirty = 0x4, kBusy = 0x8;
  void refresh_busy(int64_t k);
  uint8_t byte(int64_t k) const {
    const auto& page = pages_[static_cast<size_t>(k >> kPageBits)];
    return page ? page[static_cast<size_t>(k & (kPageTiles - 1))] : fill_;
  }
  uint8_t& slot(int64_t k);

  int64_t tiles_ = 0;
  uint8_t fill_ = 0;  // the state of every tile of a page not yet allocated
  std::vector<std::unique_ptr<uint8_t[]>> pages_;
  int64_t count_[4] = {0, 0, 0, 0};
  int64_t dirty_count_ = 0;
  std::unordered_map<int64_t, Buffer> buffers_;
  std::unordered_map<int64_t, uint32_t> readers_;
  std::unordered_map<int64_t, const Request*> writers_;
  std::unordered_map<int64_t, uint32_t> retained_;
  std::unordered_set<int64_t> deferred_;
  int64_t all_readers_ = 0;
  int64_t residency_writes_ = 0;
  int64_t pending_ = 0;
};

}  // namespace sw::tiled
