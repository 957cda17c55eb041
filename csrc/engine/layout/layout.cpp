// Layout math on CuTe-style shape/stride trees (see layout/layout.hpp).
#include "layout/layout.hpp"

#include <algorithm>
#include <numeric>

#include "layout/algebra.hpp"

namespace sw {

namespace {

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

void append_tree(std::string& s, const IntTree& t) {
  if (t.is_leaf) {
    s += std::to_string(t.value);
    return;
  }
  s += '(';
  for (size_t i = 0; i < t.children.size(); ++i) {
    if (i) s += ", ";
    append_tree(s, t.children[i]);
  }
  if (t.children.size() == 1) s += ',';
  s += ')';
}

// path: the position of the node being compared, as "mode 1.0" text.
std::string mismatch_at(const IntTree& a, const IntTree& b, const std::string& path) {
  const std::string where = path.empty() ? std::string("top level") : "mode " + path;
  if (a.is_leaf != b.is_leaf) {
    return where + ": shape has " + (a.is_leaf ? "a leaf" : "a nested mode") + " but stride has " +
           (b.is_leaf ? "a leaf" : "a nested mode");
  }
  if (a.is_leaf) return {};
  if (a.children.size() != b.children.size()) {
    return where + ": shape has " + std::to_string(a.children.size()) + " modes but stride has " +
           std::to_string(b.children.size());
  }
  for (size_t i = 0; i < a.children.size(); ++i) {
    std::string sub = mismatch_at(a.children[i], b.children[i],
                                  path.empty() ? std::to_string(i) : path + "." + std::to_string(i));
    if (!sub.empty()) return sub;
  }
  return {};
}

size_t count_leaves(const IntTree& t) {
  if (t.is_leaf) return 1;
  size_t n = 0;
  for (const IntTree& c : t.children) n += count_leaves(c);
  return n;
}

void collect_modes(const IntTree& shape, const IntTree& stride, std::vector<LeafMode>& out) {
  if (shape.is_leaf) {
    out.push_back({shape.value, stride.value});
    return;
  }
  for (size_t i = 0; i < shape.children.size(); ++i) collect_modes(shape.children[i], stride.children[i], out);
}

IntTree broadcast_strides(const IntTree& shape, const IntTree& stride, const IntTree& target,
                          const std::string& path) {
  const std::string where = path.empty() ? std::string("top level") : "mode " + path;
  if (shape.is_leaf != target.is_leaf)
    throw std::invalid_argument("cannot broadcast: " + where + " is " + (shape.is_leaf ? "a leaf" : "nested") +
                                " in the layout but " + (target.is_leaf ? "a leaf" : "nested") +
                                " in the target shape");
  if (shape.is_leaf) {
    if (shape.value == target.value) return stride;
    // Only extent 1 widens, and never to an empty mode.
    if (shape.value == 1 && target.value >= 1) return IntTree::leaf(0);
    throw std::invalid_argument("cannot broadcast: " + where + " has extent " + std::to_string(shape.value) +
                                ", target extent " + std::to_string(target.value) + " (only extent 1 widens)");
  }
  if (shape.children.size() != target.children.size())
    throw std::invalid_argument("cannot broadcast: " + where + " has " + std::to_string(shape.children.size()) +
                                " modes in the layout but " + std::to_string(target.children.size()) +
                                " in the target shape");
  std::vector<IntTree> c;
  c.reserve(shape.children.size());
  for (size_t i = 0; i < shape.children.size(); ++i)
    c.push_back(broadcast_strides(shape.children[i], stride.children[i], target.children[i],
                                  path.empty() ? std::to_string(i) : path + "." + std::to_string(i)));
  return IntTree::node(std::move(c));
}

// Exact collision search by marking every index in a bitset of span bits;
// stops at the first repeated index, so it runs at most span + 1 steps.
bool injective_by_bitset(const std::vector<LeafMode>& m, int64_t span) {
  std::vector<uint64_t> bits(static_cast<size_t>(span / 64 + 1), 0);
  return walk(joint_modes<1>({&m}), [&](const Indices<1>& i) {
    uint64_t& w = bits[static_cast<size_t>(i[0] >> 6)];
    const uint64_t b = uint64_t{1} << (i[0] & 63);
    if (w & b) return false;
    w |= b;
    return true;
  });
}

// Exact check by listing all indices and looking for a duplicate.
bool injective_by_sort(const std::vector<LeafMode>& m) {
  std::vector<int64_t> idx = coordinate_indices(m);
  std::sort(idx.begin(), idx.end());
  return std::adjacent_find(idx.begin(), idx.end()) == idx.end();
}

// Budgets of the exact fallbacks: 2^26 bits (8 MiB) of bitset, 2^21 sorted
// indices (16 MiB).
constexpr int64_t kBitsetBudget = int64_t{1} << 26;
constexpr int64_t kSortBudget = int64_t{1} << 21;

}  // namespace

int IntTree::depth() const {
  if (is_leaf) return 0;
  int d = 0;
  for (const IntTree& c : children) d = std::max(d, c.depth());
  return d + 1;
}

void IntTree::collect_leaves(std::vector<int64_t>& out) const {
  if (is_leaf) {
    out.push_back(value);
    return;
  }
  for (const IntTree& c : children) c.collect_leaves(out);
}

int64_t IntTree::product() const {
  if (is_leaf) return value;
  int64_t p = 1;
  for (const IntTree& c : children)
    if (!mul_ok(p, c.product(), &p)) throw std::overflow_error("product of extents overflows int64");
  return p;
}

std::string to_string(const IntTree& t) {
  std::string s;
  append_tree(s, t);
  return s;
}

bool congruent(const IntTree& a, const IntTree& b) {
  if (a.is_leaf != b.is_leaf) return false;
  if (a.is_leaf) return true;
  if (a.children.size() != b.children.size()) return false;
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!congruent(a.children[i], b.children[i])) return false;
  return true;
}

std::string congruence_mismatch(const IntTree& shape, const IntTree& stride) {
  return mismatch_at(shape, stride, "");
}

int64_t tree_index_of_ordinal(const IntTree& shape, const IntTree& stride, int64_t ordinal) {
  if (shape.is_leaf) return ordinal * stride.value;
  int64_t index = 0;
  const size_t n = shape.children.size();
  for (size_t i = 0; i < n; ++i) {
    const IntTree& s = shape.children[i];
    // The last mode takes the whole remaining ordinal (it is in range).
    if (i + 1 == n) return index + tree_index_of_ordinal(s, stride.children[i], ordinal);
    const int64_t e = s.is_leaf ? s.value : s.product();
    index += tree_index_of_ordinal(s, stride.children[i], ordinal % e);
    ordinal /= e;
  }
  return index;
}

Layout::Layout(IntTree shape, IntTree stride) : shape_(std::move(shape)), stride_(std::move(stride)) {
  if (shape_.is_leaf || stride_.is_leaf) throw std::invalid_argument("layout shape and stride roots must be tuples");
  // The plain check first: the text of the mismatch is built only to throw.
  if (!congruent(shape_, stride_))
    throw std::invalid_argument("shape " + to_string(shape_) + " and stride " + to_string(stride_) +
                                " are not congruent: " + congruence_mismatch(shape_, stride_));
  leaves_.reserve(count_leaves(shape_));
  collect_modes(shape_, stride_, leaves_);
  measure();
}

Layout Layout::flat(std::vector<LeafMode> leaves) {
  Layout l;
  std::vector<IntTree> s, d;
  s.reserve(leaves.size());
  d.reserve(leaves.size());
  for (const LeafMode& m : leaves) {
    s.push_back(IntTree::leaf(m.extent));
    d.push_back(IntTree::leaf(m.stride));
  }
  l.shape_ = IntTree::node(std::move(s));
  l.stride_ = IntTree::node(std::move(d));
  l.leaves_ = std::move(leaves);
  l.measure();
  return l;
}

void Layout::measure() {
  int64_t size = 1, span = 0;
  bool empty = false;
  for (const LeafMode& m : leaves_) {
    if (m.extent < 0) throw std::invalid_argument("extent must be >= 0, got " + std::to_string(m.extent));
    if (m.stride < 0) throw std::invalid_argument("stride must be >= 0, got " + std::to_string(m.stride));
    empty = empty || m.extent == 0;
  }
  for (const LeafMode& m : leaves_) {
    if (empty) break;
    if (!mul_ok(size, m.extent, &size))
      throw std::invalid_argument("layout size overflows int64 for shape " + to_string(shape_));
    int64_t reach;
    if (!mul_ok(m.stride, m.extent - 1, &reach) || !add_ok(span, reach, &span) || span == INT64_MAX)
      throw std::invalid_argument("layout cosize overflows int64 for shape " + to_string(shape_) + " and stride " +
                                  to_string(stride_));
  }
  // A layout with an extent-0 mode (an empty tensor's: Shape itself refuses
  // 0) has no coordinate and reaches no slot.
  size_ = empty ? 0 : size;
  cosize_ = empty ? 0 : span + 1;
}

int64_t Layout::index_of_ordinal(int64_t ordinal) const {
  int64_t index = 0;
  for (const LeafMode& m : leaves_) {
    if (m.extent == 1) continue;
    index += (ordinal % m.extent) * m.stride;
    ordinal /= m.extent;
  }
  return index;
}

bool Layout::has_stride_zero() const { return sw::has_stride_zero(leaves_); }

// Injectivity: is there a nonzero d with |d_i| < e_i and sum d_i*s_i == 0
// (two coordinates whose difference maps to 0)? In general this is Equal
// Subset Sum (NP-hard), so no cheap exact rule exists; the steps below are
// each exact (sound and complete) and in practice one of them decides:
//  1. extent-1 leaves never matter; a stride-0 leaf of extent > 1 collides;
//  2. pigeonhole: size > cosize collides;
//  3. sorted by stride, each stride >= 1 + span of all smaller ones (the
//     mixed-radix rule that every compact, gapped or tiled layout obeys)
//     proves injectivity;
//  4. extent capping: a collision's |d_k| * s_k is at most the span of the
//     other leaves, so each extent can be cut to floor(others/s_k) + 1
//     without changing the answer; repeat to a fixpoint, drop leaves cut to
//     1, divide by the common gcd, and retry 2 and 3;
//  5. exact enumeration when the reduced span fits a 2^26-bit bitset or the
//     reduced size is <= 2^21 (early exit on the first collision, so the
//     work is bounded by the budget, never by the size).
// Beyond those budgets (pathological strides with huge, mutually
// overlapping extents) the answer is false: "not proven injective". Callers
// then take the safe path (canonical layout for a gradient).
bool Layout::is_injective() const {
  if (size_ == 0) return true;  // no coordinates, no collision
  std::vector<LeafMode> m;
  for (const LeafMode& l : leaves_) {
    if (l.extent == 1) continue;
    if (l.stride == 0) return false;
    m.push_back(l);
  }
  for (int round = 0;; ++round) {
    if (m.empty()) return true;
    std::sort(m.begin(), m.end(), [](const LeafMode& a, const LeafMode& b) {
      return a.stride != b.stride ? a.stride < b.stride : a.extent < b.extent;
    });
    // Spans fit int64: every reduced layout spans at most the original.
    int64_t span = 0, size = 1;
    bool radix = true;
    for (const LeafMode& l : m) {
      if (l.stride <= span) radix = false;
      span += l.stride * (l.extent - 1);
      if (size <= span + 1 && !mul_ok(size, l.extent, &size)) size = INT64_MAX;
    }
    if (size > span + 1) return false;  // pigeonhole (size saturates above span)
    if (radix) return true;
    if (round > 0) {
      if (span < kBitsetBudget) return injective_by_bitset(m, span);
      if (size <= kSortBudget) return injective_by_sort(m);
      return false;  // undecided within budget; see above
    }
    // Step 4: cap towards a fixpoint. Every single cap is sound on its own,
    // so bounding the passes (against slow convergence) loses nothing but
    // reduction.
    bool changed = true;
    for (int pass = 0; changed && pass < 64; ++pass) {
      changed = false;
      int64_t total = 0;
      for (const LeafMode& l : m) total += l.stride * (l.extent - 1);
      for (LeafMode& l : m) {
        const int64_t others = total - l.stride * (l.extent - 1);
        const int64_t cap = others / l.stride + 1;
        if (cap < l.extent) {
          total -= l.stride * (l.extent - cap);
          l.extent = cap;
          changed = true;
        }
      }
    }
    std::erase_if(m, [](const LeafMode& l) { return l.extent == 1; });
    int64_t g = 0;
    for (const LeafMode& l : m) g = std::gcd(g, l.stride);
    if (g > 1)
      for (LeafMode& l : m) l.stride /= g;
  }
}

Layout Layout::canonical(const IntTree& shape) { return compact(shape); }

Layout Layout::broadcast_to(const IntTree& target_shape) const {
  IntTree stride = broadcast_strides(shape_, stride_, target_shape, "");
  return Layout(target_shape, std::move(stride));
}

}  // namespace sw
