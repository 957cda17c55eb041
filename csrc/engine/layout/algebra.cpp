// Free functions of the layout algebra (declared in layout/algebra.hpp): compact,
// coalesce, division by a tiler, broadcasting, and the gradient layout rules
// of autograd.
#include <stdexcept>
#include <string>

#include "layout/algebra.hpp"

namespace sw {

namespace {

// The compact rule, in one place: a leaf's stride is the product of the
// extents of all earlier leaves (depth-first). The running product may
// overflow only past the last leaf of a valid layout; saturating lets the
// Layout constructor report the size.
struct CompactStrides {
  int64_t running = 1;
  int64_t next(int64_t extent) {
    const int64_t stride = running;
    if (__builtin_mul_overflow(running, extent, &running)) running = INT64_MAX;
    return stride;
  }
};

IntTree compact_tree(const IntTree& shape, CompactStrides& rule) {
  if (shape.is_leaf) return IntTree::leaf(rule.next(shape.value));
  std::vector<IntTree> c;
  c.reserve(shape.children.size());
  for (const IntTree& ch : shape.children) c.push_back(compact_tree(ch, rule));
  return IntTree::node(std::move(c));
}

IntTree flat_tree(const std::vector<int64_t>& values) {
  std::vector<IntTree> c;
  c.reserve(values.size());
  for (int64_t v : values) c.push_back(IntTree::leaf(v));
  return IntTree::node(std::move(c));
}

}  // namespace

std::vector<LeafMode> compact(const std::vector<LeafMode>& leaves) {
  std::vector<LeafMode> out;
  out.reserve(leaves.size());
  CompactStrides rule;
  for (const LeafMode& m : leaves) out.push_back({m.extent, rule.next(m.extent)});
  return out;
}

Layout compact(const IntTree& shape) {
  if (shape.is_leaf) throw std::invalid_argument("canonical layout needs a shape tuple, not a leaf");
  CompactStrides rule;
  IntTree stride = compact_tree(shape, rule);
  return Layout(shape, std::move(stride));
}

std::vector<LeafMode> coalesce(const std::vector<LeafMode>& leaves) {
  JointModes<1> m;
  for (const LeafMode& l : leaves) {
    if (l.extent < 1) throw std::invalid_argument("coalesce needs extents >= 1, got " + std::to_string(l.extent));
    m.append(l.extent, {l.stride});
  }
  std::vector<LeafMode> out;
  out.reserve(m.extent.size());
  for (size_t d = 0; d < m.extent.size(); ++d) out.push_back({m.extent[d], m.stride[d][0]});
  return out;
}

Layout coalesce(const Layout& layout) {
  std::vector<int64_t> extents, strides;
  for (const LeafMode& l : coalesce(layout.leaves())) {
    extents.push_back(l.extent);
    strides.push_back(l.stride);
  }
  return Layout(flat_tree(extents), flat_tree(strides));
}

std::optional<std::pair<std::vector<LeafMode>, std::vector<LeafMode>>> divide_leaves(
    const std::vector<LeafMode>& leaves, int64_t n) {
  if (n < 1) throw std::invalid_argument("a tile extent must be >= 1, got " + std::to_string(n));
  std::vector<LeafMode> tile, rest;
  int64_t need = n;  // ordinals of the tile still to cover
  for (const LeafMode& l : coalesce(leaves)) {
    if (need == 1) {
      rest.push_back(l);
    } else if (need % l.extent == 0) {
      tile.push_back(l);
      need /= l.extent;
    } else if (l.extent % need == 0) {
      tile.push_back({need, l.stride});
      rest.push_back({l.extent / need, l.stride * need});
      need = 1;
    } else {
      return std::nullopt;
    }
  }
  if (need != 1) return std::nullopt;
  tile = coalesce(tile);
  rest = coalesce(rest);
  if (tile.empty()) tile.push_back({1, 0});
  if (rest.empty()) rest.push_back({1, 0});
  return std::make_pair(std::move(tile), std::move(rest));
}

namespace {

IntTree leaf_tree(const std::vector<LeafMode>& leaves, bool strides) {
  std::vector<IntTree> c;
  c.reserve(leaves.size());
  for (const LeafMode& l : leaves) c.push_back(IntTree::leaf(strides ? l.stride : l.extent));
  return IntTree::node(std::move(c));
}

// Every mode divided by its tiler extent: (tile parts, rest parts).
std::pair<std::vector<std::vector<LeafMode>>, std::vector<std::vector<LeafMode>>> divide_modes(
    const Layout& layout, const std::vector<int64_t>& tiler) {
  const IntTree& shape = layout.shape();
  if (shape.is_leaf || shape.children.size() != tiler.size())
    throw std::invalid_argument("the tiler has " + std::to_string(tiler.size()) + " extents for a layout of rank " +
                                std::to_string(shape.is_leaf ? 0 : shape.children.size()));
  std::vector<std::vector<LeafMode>> tiles, rests;
  for (size_t i = 0; i < tiler.size(); ++i) {
    const Layout mode(IntTree::node({shape.children[i]}), IntTree::node({layout.stride().children[i]}));
    if (tiler[i] < 1 || mode.size() % tiler[i] != 0)
      throw std::invalid_argument("tiler extent " + std::to_string(tiler[i]) + " does not divide mode " +
                                  std::to_string(i) + " of size " + std::to_string(mode.size()));
    auto parts = divide_leaves(mode.leaves(), tiler[i]);
    if (!parts)
      throw std::invalid_argument("mode " + std::to_string(i) + " has no leaf boundary at ordinal " +
                                  std::to_string(tiler[i]) + ": it does not divide by that extent");
    tiles.push_back(std::move(parts->first));
    rests.push_back(std::move(parts->second));
  }
  return {std::move(tiles), std::move(rests)};
}

}  // namespace

Layout logical_divide(const Layout& layout, const std::vector<int64_t>& tiler) {
  auto [tiles, rests] = divide_modes(layout, tiler);
  std::vector<IntTree> shape, stride;
  for (size_t i = 0; i < tiles.size(); ++i) {
    shape.push_back(IntTree::node({leaf_tree(tiles[i], false), leaf_tree(rests[i], false)}));
    stride.push_back(IntTree::node({leaf_tree(tiles[i], true), leaf_tree(rests[i], true)}));
  }
  return Layout(IntTree::node(std::move(shape)), IntTree::node(std::move(stride)));
}

Layout zipped_divide(const Layout& layout, const std::vector<int64_t>& tiler) {
  auto [tiles, rests] = divide_modes(layout, tiler);
  std::vector<IntTree> ts, tt, rs, rt;
  for (size_t i = 0; i < tiles.size(); ++i) {
    ts.push_back(leaf_tree(tiles[i], false));
    tt.push_back(leaf_tree(tiles[i], true));
    rs.push_back(leaf_tree(rests[i], false));
    rt.push_back(leaf_tree(rests[i], true));
  }
  return Layout(IntTree::node({IntTree::node(std::move(ts)), IntTree::node(std::move(rs))}),
                IntTree::node({IntTree::node(std::move(tt)), IntTree::node(std::move(rt))}));
}

bool has_stride_zero(const std::vector<LeafMode>& leaves) {
  bool repeats = false;
  for (const LeafMode& m : leaves) {
    if (m.extent == 0) return false;  // no element: nothing repeats (and nothing is summed)
    repeats = repeats || (m.stride == 0 && m.extent > 1);
  }
  return repeats;
}

int64_t size_of(const std::vector<LeafMode>& leaves) {
  int64_t n = 1;
  for (const LeafMode& m : leaves) n *= m.extent;
  return n;
}

std::vector<LeafMode> broadcast_one(const std::vector<LeafMode>& leaves) {
  std::vector<LeafMode> out;
  out.reserve(leaves.size());
  for (const LeafMode& m : leaves) out.push_back({m.extent, 0});
  return out;
}

std::vector<int64_t> coordinate_indices(const std::vector<LeafMode>& leaves) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(size_of(leaves)));
  walk(joint_modes<1>({&leaves}), [&](const Indices<1>& i) { out.push_back(i[0]); });
  return out;
}

IntTree broadcast_shapes(const IntTree& a, const IntTree& b) {
  if (a.is_leaf != b.is_leaf) throw std::invalid_argument("a leaf faces a nested mode");
  if (a.is_leaf) {
    if (a.value == b.value || b.value == 1) return a;
    if (a.value == 1) return b;
    throw std::invalid_argument("extents " + std::to_string(a.value) + " and " + std::to_string(b.value) +
                                " differ and neither is 1");
  }
  if (a.children.size() != b.children.size())
    throw std::invalid_argument("modes of different ranks (" + std::to_string(a.children.size()) + " and " +
                                std::to_string(b.children.size()) + ")");
  std::vector<IntTree> c;
  c.reserve(a.children.size());
  for (size_t i = 0; i < a.children.size(); ++i) c.push_back(broadcast_shapes(a.children[i], b.children[i]));
  return IntTree::node(std::move(c));
}

std::vector<LeafMode> reduction_leaves(const Layout& g, const Layout& x, const Layout& target) {
  const std::vector<LeafMode>& lg = g.leaves();
  const std::vector<LeafMode>& lx = x.leaves();
  const std::vector<LeafMode>& lt = target.leaves();
  const char* mismatch = "the gradient's shape does not match the input's shape";
  if (lg.size() != lx.size() || !congruent(g.shape(), x.shape())) throw std::invalid_argument(mismatch);
  if (lt.size() != lx.size()) throw std::invalid_argument("the gradient layout is not congruent with the input");
  std::vector<LeafMode> out;
  out.reserve(lg.size());
  for (size_t d = 0; d < lg.size(); ++d) {
    if (lx[d].extent != lg[d].extent && lx[d].extent != 1) throw std::invalid_argument(mismatch);
    out.push_back({lg[d].extent, lx[d].extent == 1 ? 0 : lt[d].stride});
  }
  return out;
}

Layout gradient_layout(const Layout& layout) {
  if (layout.is_injective()) return layout;
  return compact(layout.shape());
}

CotangentFit cotangent_fit(const Layout& target, const Layout& g) {
  if (!(g.shape() == target.shape())) return CotangentFit::ShapeDiffers;
  if (target.is_injective()) return g == target ? CotangentFit::Ok : CotangentFit::NotOwnLayout;
  return g.is_injective() ? CotangentFit::Ok : CotangentFit::NotInjective;
}

}  // namespace sw
