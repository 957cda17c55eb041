// Tile geometry and the tile-footprint compatibility rule (geometry.hpp).
#include "tiled/geometry.hpp"

#include <algorithm>
#include <stdexcept>

#include "layout/algebra.hpp"

namespace sw::tiled {

namespace {

constexpr int64_t kEnumerateLimit = int64_t(1) << 20;

int64_t checked_product(const std::vector<int64_t>& v, int64_t start = 1) {
  int64_t p = start;
  for (int64_t x : v)
    if (__builtin_mul_overflow(p, x, &p)) throw std::invalid_argument("the tiled extents overflow int64");
  return p;
}

// Mode i of l as its own leaf list.
Leaves mode_leaves(const Layout& l, size_t i) {
  return Layout(IntTree::node({l.shape().children[i]}), IntTree::node({l.stride().children[i]})).leaves();
}

IntTree leaf_node(const std::vector<int64_t>& v) {
  std::vector<IntTree> c;
  for (int64_t x : v) c.push_back(IntTree::leaf(x));
  return IntTree::node(std::move(c));
}

bool injective(const Leaves& leaves) {
  if (has_stride_zero(leaves)) return false;
  std::vector<int64_t> e, s;
  for (const LeafMode& l : leaves) {
    e.push_back(l.extent);
    s.push_back(l.stride);
  }
  if (e.empty()) return true;
  return Layout(leaf_node(e), leaf_node(s)).is_injective();
}

std::vector<int64_t> image(const Leaves& leaves) {
  std::vector<int64_t> v = coordinate_indices(leaves);
  std::sort(v.begin(), v.end());
  return v;
}

Leaves flatten(const ModeLeaves& m) {
  Leaves out;
  for (const Leaves& l : m) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace

const char* to_string(GeometryKind k) {
  switch (k) {
    case GeometryKind::Tiles: return "tiles";
    case GeometryKind::Dense: return "dense";
    case GeometryKind::RowMajor: return "row-major";
    case GeometryKind::Explicit: return "layout";
  }
  return "?";
}

int64_t index_of(const Leaves& leaves, int64_t x) {
  int64_t idx = 0;
  for (const LeafMode& l : leaves) {
    idx += (x % l.extent) * l.stride;
    x /= l.extent;
  }
  return idx;
}

std::string tuple_text(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

Leaves normal_form(const ModeLeaves& w) {
  Leaves all;
  for (const LeafMode& l : flatten(w))
    if (l.extent > 1) all.push_back(l);
  std::sort(all.begin(), all.end(), [](const LeafMode& a, const LeafMode& b) {
    return a.stride != b.stride ? a.stride < b.stride : a.extent < b.extent;
  });
  return coalesce(all);
}

Geometry::Geometry(GeometryKind kind, std::vector<int64_t> grid, std::vector<int64_t> tile, const Layout* layout)
    : kind_(kind), grid_(std::move(grid)), tile_(std::move(tile)) {
  const size_t r = grid_.size();
  if (r == 0 || tile_.size() != r)
    throw std::invalid_argument("grid_shape " + tuple_text(grid_) + " and tile_shape " + tuple_text(tile_) +
                                " must have one non-zero rank");
  for (size_t i = 0; i < r; ++i)
    if (grid_[i] < 1 || tile_[i] < 1)
      throw std::invalid_argument("extents must be positive: grid_shape " + tuple_text(grid_) + ", tile_shape " +
                                  tuple_text(tile_));
  tiles_ = checked_product(grid_);
  tile_size_ = checked_product(tile_);
  int64_t total;
  if (__builtin_mul_overflow(tiles_, tile_size_, &total)) throw std::invalid_argument("the tiled extents overflow int64");
  std::vector<int64_t> full(r);
  for (size_t i = 0; i < r; ++i) full[i] = tile_[i] * grid_[i];
  std::vector<IntTree> shape, stride;
  switch (kind_) {
    case GeometryKind::Tiles: {
      int64_t inner = 1, outer = tile_size_;
      for (size_t i = 0; i < r; ++i) {
        shape.push_back(leaf_node({tile_[i], grid_[i]}));
        stride.push_back(leaf_node({inner, outer}));
        inner *= tile_[i];
        outer *= grid_[i];
      }
      layout_ = Layout(IntTree::node(std::move(shape)), IntTree::node(std::move(stride)));
      break;
    }
    case GeometryKind::Dense:
    case GeometryKind::RowMajor: {
      std::vector<int64_t> s(r);
      int64_t acc = 1;
      for (size_t k = 0; k < r; ++k) {
        const size_t i = kind_ == GeometryKind::Dense ? k : r - 1 - k;
        s[i] = acc;
        acc *= full[i];
      }
      layout_ = Layout(leaf_node(full), leaf_node(s));
      break;
    }
    case GeometryKind::Explicit: {
      if (!layout) throw std::invalid_argument("an explicit geometry needs a Layout");
      const IntTree& sh = layout->shape();
      if (sh.is_leaf || sh.children.size() != r)
        throw std::invalid_argument("the geometry Layout has " + std::to_string(sh.is_leaf ? 0 : sh.children.size()) +
                                    " top-level modes; the tile grid has rank " + std::to_string(r));
      for (size_t i = 0; i < r; ++i) {
        const int64_t n = size_of(mode_leaves(*layout, i));
        if (n != full[i])
          throw std::invalid_argument("mode " + std::to_string(i) + " of the geometry Layout has " + std::to_string(n) +
                                      " coordinates, not tile_shape[" + std::to_string(i) + "] * grid_shape[" +
                                      std::to_string(i) + "] = " + std::to_string(full[i]));
      }
      if (layout->cosize() != layout->size() || !layout->is_injective())
        throw std::invalid_argument("the geometry Layout must be compact and injective (a permutation of its " +
                                    std::to_string(layout->size()) + " slots): cosize " +
                                    std::to_string(layout->cosize()));
      layout_ = *layout;
      break;
    }
  }
  // Tile geometry is the division of P by the tile shape.
  for (size_t i = 0; i < r; ++i) {
    auto parts = divide_leaves(mode_leaves(layout_, i), tile_[i]);
    if (!parts)
      throw std::invalid_argument("mode " + std::to_string(i) + " of the geometry Layout has no leaf boundary at the "
                                  "tile extent " + std::to_string(tile_[i]) + ": it does not divide into tiles");
    within_.push_back(std::move(parts->first));
    across_.push_back(std::move(parts->second));
  }
  footprint_ = normal_form(within_);
  int64_t acc = 1;
  for (const LeafMode& l : footprint_) {
    packed_stride_.push_back(acc);
    acc *= l.extent;
  }
  run_ = (!footprint_.empty() && footprint_[0].stride == 1) ? footprint_[0].extent : 1;
  if (footprint_.empty()) run_ = 1;
  grid_scale_.resize(r);
  int64_t g = 1;
  for (size_t i = 0; i < r; ++i) {
    grid_scale_[i] = g;
    g *= grid_[i];
  }
  for (size_t i = 0; i < r; ++i) {
    for (int part = 0; part < 2; ++part) {
      int64_t weight = 1;
      for (const LeafMode& l : part == 0 ? within_[i] : across_[i]) {
        if (l.extent > 1) digits_.push_back({l.extent, l.stride, part == 0, i, weight});
        weight *= l.extent;
      }
    }
  }
  std::sort(digits_.begin(), digits_.end(), [](const Digit& a, const Digit& b) { return a.stride > b.stride; });
}

int64_t Geometry::ordinal(const std::vector<int64_t>& t) const {
  int64_t k = 0;
  for (size_t i = 0; i < t.size(); ++i) k += t[i] * grid_scale_[i];
  return k;
}

std::vector<int64_t> Geometry::coordinate(int64_t k) const {
  std::vector<int64_t> t(grid_.size());
  for (size_t i = 0; i < grid_.size(); ++i) {
    t[i] = k % grid_[i];
    k /= grid_[i];
  }
  return t;
}

int64_t Geometry::base(int64_t k) const {
  int64_t b = 0;
  for (size_t i = 0; i < grid_.size(); ++i) {
    b += index_of(across_[i], k % grid_[i]);
    k /= grid_[i];
  }
  return b;
}

int64_t Geometry::run_offset(int64_t j) const { return unpack(j * run_); }

std::pair<int64_t, int64_t> Geometry::locate(int64_t slot) const {
  std::vector<int64_t> t(grid_.size(), 0);
  int64_t offset = 0;
  for (const Digit& d : digits_) {
    const int64_t q = slot / d.stride;
    slot -= q * d.stride;
    if (d.within)
      offset += q * d.stride;
    else
      t[d.mode] += q * d.weight;
  }
  return {ordinal(t), pack(offset)};
}

int64_t Geometry::unpack(int64_t p) const {
  int64_t o = 0;
  for (size_t j = footprint_.size(); j-- > 0;) {
    const int64_t d = p / packed_stride_[j];
    p -= d * packed_stride_[j];
    o += d * footprint_[j].stride;
  }
  return o;
}

int64_t Geometry::pack(int64_t o) const {
  int64_t p = 0;
  for (size_t j = footprint_.size(); j-- > 0;) {
    const int64_t d = o / footprint_[j].stride;
    if (d >= footprint_[j].extent) throw std::logic_error("an offset outside the tile footprint");
    o -= d * footprint_[j].stride;
    p += d * packed_stride_[j];
  }
  if (o != 0) throw std::logic_error("an offset outside the tile footprint");
  return p;
}

ModeLeaves Geometry::packed(const ModeLeaves& w) const {
  std::vector<int64_t> used(footprint_.size(), 0);
  ModeLeaves out;
  for (const Leaves& mode : w) {
    Leaves m;
    for (const LeafMode& l : mode) {
      if (l.extent == 1) {
        m.push_back({1, 0});
        continue;
      }
      int64_t o = l.stride, p = 0;
      for (size_t j = footprint_.size(); j-- > 0;) {
        const int64_t d = o / footprint_[j].stride;
        o -= d * footprint_[j].stride;
        p += d * packed_stride_[j];
        used[j] += d * (l.extent - 1);
      }
      if (o != 0) throw std::logic_error("a within-tile stride outside the tile footprint");
      m.push_back({l.extent, p});
    }
    out.push_back(std::move(m));
  }
  for (size_t j = 0; j < footprint_.size(); ++j)
    if (used[j] > footprint_[j].extent - 1)
      throw std::logic_error("the within-tile association has no layout over a packed tile");
  return out;
}

Incompatible Geometry::check(const Layout& l, int64_t offset, Association* out) const {
  using R = Incompatible::Rule;
  const IntTree& sh = l.shape();
  const size_t r = grid_.size();
  const size_t modes = sh.is_leaf ? 0 : sh.children.size();
  if (modes != r) return {R::Rank, 0, 0, static_cast<int64_t>(modes), static_cast<int64_t>(r)};
  if (offset != 0) return {R::Offset, 0, 0, offset, 0};
  ModeLeaves w(r);
  bool canonical = true;
  for (size_t i = 0; i < r; ++i) {
    const Leaves m = mode_leaves(l, i);
    const int64_t n = size_of(m), want = tile_[i] * grid_[i];
    if (n != want) return {R::ModeSize, static_cast<int64_t>(i), 0, n, want};
    auto parts = divide_leaves(m, tile_[i]);
    if (!parts) return {R::Crosses, static_cast<int64_t>(i), 0, 0, tile_[i]};
    if (!injective(parts->first)) return {R::Repeats, static_cast<int64_t>(i), 0, 0, 0};
    if (parts->second != across_[i]) {
      int64_t c = 1;
      while (c < grid_[i] && index_of(parts->second, c) == index_of(across_[i], c)) ++c;
      return {R::Remapped, static_cast<int64_t>(i), c < grid_[i] ? c : 1, 0, 0};
    }
    canonical = canonical && parts->first == within_[i];
    w[i] = std::move(parts->first);
  }
  if (normal_form(w) != footprint_) {
    // Equal normal forms are the common proof; a pair of different forms
    // with one image is still compatible (decided by listing both).
    const Leaves mine = flatten(w), theirs = flatten(within_);
    if (tile_size_ > kEnumerateLimit) return {R::Aliases, 0, 0, 0, 0};
    const std::vector<int64_t> a = image(mine);
    if (std::adjacent_find(a.begin(), a.end()) != a.end() || a != image(theirs)) return {R::Aliases, 0, 0, 0, 0};
  }
  if (out) {
    out->within = std::move(w);
    out->canonical = canonical;
  }
  return {};
}

std::string Geometry::message(const Incompatible& why) const {
  using R = Incompatible::Rule;
  const std::string tail = ": it is not tile-footprint compatible";
  const std::string mode = std::to_string(why.mode);
  switch (why.rule) {
    case R::None: return "";
    case R::Rank:
      return "the Tensor has " + std::to_string(why.got) + " top-level modes but the tile grid " + tuple_text(grid_) +
             " has rank " + std::to_string(why.want) + tail;
    case R::Offset:
      return "a Tensor at offset " + std::to_string(why.got) + " is not tile-footprint compatible (the tiles start at 0)";
    case R::ModeSize:
      return "mode " + mode + " of the Tensor has " + std::to_string(why.got) + " coordinates, not tile_shape[" + mode +
             "] * grid_shape[" + mode + "] = " + std::to_string(why.want) + tail;
    case R::Crosses:
      return "mode " + mode + " of the Tensor has no leaf boundary at the tile extent " + std::to_string(why.want) +
             ", so a Tensor tile of mode " + mode + " reaches slots of another carrier tile" + tail;
    case R::Repeats:
      return "the Tensor tile at coordinate 0 of mode " + mode + " repeats a physical slot" + tail;
    case R::Remapped:
      return "the Tensor tile at coordinate " + std::to_string(why.coordinate) + " of mode " + mode +
             " reaches slots of another carrier tile (tile coordinates remapped or spanning tiles)" + tail;
    case R::Aliases:
      return "a Tensor tile aliases physical slots or omits slots of its carrier tile footprint" + tail;
  }
  return "incompatible" + tail;
}

Geometry Geometry::regrid(const std::vector<int64_t>& grid) const {
  const GeometryKind k = kind_ == GeometryKind::Explicit ? GeometryKind::Dense : kind_;
  return Geometry(k, grid, tile_);
}

}  // namespace sw::tiled
