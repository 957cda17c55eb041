// Slicing a layout (layout/slice.hpp).
#include "layout/slice.hpp"

#include "layout/algebra.hpp"
#include "layout/keys.hpp"

namespace sw {

namespace {

// Deeper nesting than a Shape allows is refused before this is reached.
constexpr size_t kMaxSliceDepth = 72;

void collect_leaves(const IntTree& s, const IntTree& d, std::vector<LeafMode>& out) {
  if (s.is_leaf) {
    out.push_back({s.value, d.value});
    return;
  }
  for (size_t i = 0; i < s.children.size(); ++i) collect_leaves(s.children[i], d.children[i], out);
}

// What one part made of one mode: kept (shape, stride) or dropped.
struct ModeOut {
  bool kept = false;
  IntTree shape, stride;
};

struct Slicer {
  SliceError* err;
  // The mode being sliced, top-level first (nesting is at most
  // kMaxTreeDepth deep); copied out only on failure.
  size_t path[kMaxSliceDepth];
  size_t depth = 0;
  int64_t offset = 0;

  SliceStatus fail(SliceStatus s, int64_t value = 0, int64_t extent = 0) {
    err->status = s;
    err->mode.assign(path, path + depth);
    err->value = value;
    err->extent = extent;
    return s;
  }

  SliceStatus range(const IntTree& s, const IntTree& d, const SlicePart& p, ModeOut* out) {
    if (p.step <= 0) return fail(SliceStatus::StepNotPositive, p.step);
    const int64_t size = mode_size(s);
    int64_t start = p.start, stop = p.stop;
    const int64_t n = adjust_range(size, &start, &stop, p.step);
    if (n == 0) return fail(SliceStatus::Empty, size);
    out->kept = true;
    if (s.is_leaf) {
      offset += start * d.value;
      out->shape = IntTree::leaf(n);
      // One element: the stride never multiplies (and step may be huge).
      out->stride = IntTree::leaf(n == 1 ? d.value : d.value * p.step);
      return SliceStatus::Ok;
    }
    if (start == 0 && p.step == 1 && n == size) {  // the whole mode, nesting kept
      out->shape = s;
      out->stride = d;
      return SliceStatus::Ok;
    }
    offset += tree_index_of_ordinal(s, d, start);
    std::vector<LeafMode> leaves;
    collect_leaves(s, d, leaves);
    std::vector<LeafMode> picked;
    if (n == 1) {
      picked.push_back({1, leaves.front().stride});
    } else if (!range_leaves(leaves, start, p.step, n, &picked)) {
      // Not runs of the leaves: still one leaf when the offsets are evenly spaced.
      int64_t spacing = 0;
      if (!range_spacing(leaves, start, p.step, n, &spacing)) return fail(SliceStatus::Inexpressible, start, stop);
      if (spacing < 0) {
        fail(SliceStatus::Decreasing, start, stop);
        err->spacing = spacing;
        return SliceStatus::Decreasing;
      }
      picked.assign(1, LeafMode{n, spacing});
    }
    if (picked.size() == 1) {
      out->shape = IntTree::leaf(picked[0].extent);
      out->stride = IntTree::leaf(picked[0].stride);
      return SliceStatus::Ok;
    }
    std::vector<IntTree> es, ss;
    for (const LeafMode& m : picked) {
      es.push_back(IntTree::leaf(m.extent));
      ss.push_back(IntTree::leaf(m.stride));
    }
    out->shape = IntTree::node(std::move(es));
    out->stride = IntTree::node(std::move(ss));
    return SliceStatus::Ok;
  }

  SliceStatus nested(const IntTree& s, const IntTree& d, const SlicePart& p, ModeOut* out) {
    if (s.is_leaf) return fail(SliceStatus::NestedOnLeaf);
    if (p.nested.size() != s.children.size())
      return fail(SliceStatus::NestedArity, static_cast<int64_t>(p.nested.size()),
                  static_cast<int64_t>(s.children.size()));
    std::vector<IntTree> es, ss;
    if (depth == kMaxSliceDepth) return fail(SliceStatus::NotAllowedNested);
    for (size_t i = 0; i < s.children.size(); ++i) {
      path[depth++] = i;
      ModeOut child;
      const SliceStatus st = mode(s.children[i], d.children[i], p.nested[i], &child);
      if (st != SliceStatus::Ok) return st;
      --depth;
      if (child.kept) {
        es.push_back(std::move(child.shape));
        ss.push_back(std::move(child.stride));
      }
    }
    if (es.empty()) return SliceStatus::Ok;  // every child indexed: the mode is dropped
    out->kept = true;
    out->shape = IntTree::node(std::move(es));
    out->stride = IntTree::node(std::move(ss));
    return SliceStatus::Ok;
  }

  SliceStatus mode(const IntTree& s, const IntTree& d, const SlicePart& p, ModeOut* out) {
    switch (p.kind) {
      case SlicePart::Kind::Index: {
        const int64_t size = mode_size(s);
        const int64_t i = p.index < 0 ? p.index + size : p.index;
        if (i < 0 || i >= size) return fail(SliceStatus::IndexOutOfRange, p.index, size);
        offset += tree_index_of_ordinal(s, d, i);
        return SliceStatus::Ok;
      }
      case SlicePart::Kind::Range:
        return range(s, d, p, out);
      case SlicePart::Kind::Nested:
        return nested(s, d, p, out);
      default:
        return fail(SliceStatus::NotAllowedNested);
    }
  }
};

bool addresses_mode(const SlicePart& p) {
  return p.kind != SlicePart::Kind::Ellipsis && p.kind != SlicePart::Kind::NewAxis;
}

}  // namespace

int64_t adjust_range(int64_t size, int64_t* start, int64_t* stop, int64_t step) {
  auto clamp = [size](int64_t* v) {
    if (*v < 0) {
      *v = *v < -size ? 0 : *v + size;
    } else if (*v > size) {
      *v = size;
    }
  };
  clamp(start);
  clamp(stop);
  if (*start >= *stop) return 0;
  return (*stop - *start - 1) / step + 1;
}

bool range_leaves(const std::vector<LeafMode>& mode, int64_t start, int64_t step, int64_t count,
                  std::vector<LeafMode>* out) {
  // Merged leaves have the same index function; the walk below needs no
  // extent-1 leaf and finds more ranges expressible on merged runs.
  const std::vector<LeafMode> leaves = coalesce(mode);
  std::vector<LeafMode> picked;
  int64_t s = start, st = step, n = count;
  size_t i = 0;
  while (n > 1) {
    if (i == leaves.size()) return false;  // not reached for a range inside the mode
    const int64_t e = leaves[i].extent, d = leaves[i].stride;
    const int64_t r = s % e, q = s / e;
    if (r + (n - 1) * st < e) {  // the rest stays inside one run of this leaf
      picked.push_back({n, d * st});
      break;
    }
    if (st % e == 0) {  // this leaf's coordinate never changes
      s = q;
      st /= e;
      ++i;
      continue;
    }
    if (e % st == 0 && r < st) {  // whole rows of this leaf, then carry cleanly
      const int64_t m = e / st;
      if (n % m != 0) return false;
      picked.push_back({m, d * st});
      s = q;
      st = 1;
      n /= m;
      ++i;
      continue;
    }
    return false;
  }
  *out = coalesce(picked);
  if (out->empty()) out->push_back({1, 0});
  return true;
}

namespace {

using Wide = __int128;  // products of strides and counts before they are known to fit

// The offset of ordinal x over leaves[i..] (first fastest).
Wide offset_from(const std::vector<LeafMode>& leaves, size_t i, int64_t x) {
  Wide off = 0;
  for (; i < leaves.size() && x != 0; ++i) {
    off += Wide(x % leaves[i].extent) * leaves[i].stride;
    x /= leaves[i].extent;
  }
  return off;
}

// f(k) = the offset over leaves[i..] of ordinal s + k * st, k < n: whether
// it is an arithmetic progression, and its step. With leaf i = (e, d),
// r = s % e, q = s / e and the rows y(k) = (s + k * st) / e,
// f(k) = d * (s + k * st) + h(y(k)) where h(y) = g(y) - d * e * y and g is
// the offset over the slower leaves, so f is one exactly when h(y(k)) is:
//  - the rows advance evenly (never or always a carry): y(k) = q + k * a,
//    and h(y(k)) is a progression exactly when g is along q, q + a, ...;
//  - rows of 0 and 1 (st < e): the 0 steps make h's step 0, so h is
//    constant on the rows q..y(n-1): g steps by d * e per row there;
//  - else (st > e, carries vary): spacing by spacing.
bool progression(const std::vector<LeafMode>& leaves, size_t i, int64_t s, int64_t st, int64_t n, Wide* step) {
  if (n <= 1 || st == 0) {
    *step = 0;
    return true;
  }
  if (i == leaves.size()) return false;  // past the mode: not reached for a range inside it
  const int64_t e = leaves[i].extent, d = leaves[i].stride;
  const int64_t q = s / e, u = st % e, w = st / e;
  const Wide carries = (Wide(s % e) + Wide(n - 1) * u) / e;  // y(n-1) - y(0) - (n-1) * w
  Wide g = 0;
  if (carries == 0) {
    if (!progression(leaves, i + 1, q, w, n, &g)) return false;
    *step = Wide(d) * u + g;
    return true;
  }
  if (carries == n - 1) {
    if (!progression(leaves, i + 1, q, w + 1, n, &g)) return false;
    *step = Wide(d) * (u - e) + g;
    return true;
  }
  if (w == 0) {
    if (!progression(leaves, i + 1, q, 1, static_cast<int64_t>(carries) + 1, &g) || g != Wide(d) * e) return false;
    *step = Wide(d) * st;
    return true;
  }
  const Wide first = offset_from(leaves, i, s);
  const Wide second = offset_from(leaves, i, s + st);
  Wide prev = second;
  for (int64_t k = 2; k < n; ++k) {
    const Wide next = offset_from(leaves, i, s + k * st);
    if (next - prev != second - first) return false;
    prev = next;
  }
  *step = second - first;
  return true;
}

}  // namespace

bool range_spacing(const std::vector<LeafMode>& mode, int64_t start, int64_t step, int64_t count, int64_t* spacing) {
  const std::vector<LeafMode> leaves = coalesce(mode);
  Wide s = 0;
  if (!progression(leaves, 0, start, step, count, &s)) return false;
  *spacing = static_cast<int64_t>(s);  // a difference of two offsets of the mode: it fits
  return true;
}

SliceStatus slice_flat(const Layout& layout, std::span<const SlicePart> key, FlatSlice* out, SliceError* err) {
  const std::vector<IntTree>& tops = layout.shape().children;
  const size_t rank = tops.size();
  for (const IntTree& m : tops)
    if (!m.is_leaf) return SliceStatus::NotFlat;
  size_t addressing = 0, ellipses = 0, added = 0;
  for (const SlicePart& p : key) {
    if (p.kind == SlicePart::Kind::Nested) return SliceStatus::NotFlat;
    if (p.kind == SlicePart::Kind::Ellipsis) ++ellipses;
    else if (p.kind == SlicePart::Kind::NewAxis) ++added;
    else ++addressing;
  }
  // Errors of the whole key (and views too wide for kCap) are slice_layout's.
  if (ellipses > 1 || addressing > rank || rank + added > FlatSlice::kCap) return SliceStatus::NotFlat;
  const std::vector<LeafMode>& modes = layout.leaves();  // the top-level modes, in order
  size_t n = 0, m = 0;
  int64_t offset = 0;
  auto fail = [&](SliceStatus s, int64_t value = 0, int64_t extent = 0) {
    err->status = s;
    err->mode.assign(1, m);
    err->value = value;
    err->extent = extent;
    return s;
  };
  for (const SlicePart& p : key) {
    switch (p.kind) {
      case SlicePart::Kind::Ellipsis:
        for (size_t k = addressing; k < rank; ++k) out->leaves[n++] = modes[m++];
        break;
      case SlicePart::Kind::NewAxis:
        out->leaves[n++] = {1, 0};
        break;
      case SlicePart::Kind::Index: {
        const int64_t size = modes[m].extent;
        const int64_t i = p.index < 0 ? p.index + size : p.index;
        if (i < 0 || i >= size) return fail(SliceStatus::IndexOutOfRange, p.index, size);
        offset += i * modes[m].stride;
        ++m;
        break;
      }
      default: {  // Range
        if (p.step <= 0) return fail(SliceStatus::StepNotPositive, p.step);
        int64_t start = p.start, stop = p.stop;
        const int64_t c = adjust_range(modes[m].extent, &start, &stop, p.step);
        if (c == 0) return fail(SliceStatus::Empty, modes[m].extent);
        offset += start * modes[m].stride;
        // One element: the stride never multiplies (and step may be huge).
        out->leaves[n++] = {c, c == 1 ? modes[m].stride : modes[m].stride * p.step};
        ++m;
        break;
      }
    }
  }
  for (; m < rank; ++m) out->leaves[n++] = modes[m];  // missing trailing parts: whole modes
  out->n = n;
  out->offset = offset;
  return SliceStatus::Ok;
}

SliceStatus slice_layout(const Layout& layout, std::span<const SlicePart> key, SliceResult* out, SliceError* err) {
  const std::vector<IntTree>& shape = layout.shape().children;
  const std::vector<IntTree>& stride = layout.stride().children;
  const size_t rank = shape.size();
  size_t addressing = 0, ellipses = 0;
  for (const SlicePart& p : key) {
    if (p.kind == SlicePart::Kind::Ellipsis) {
      if (++ellipses > 1) {
        err->status = SliceStatus::TwoEllipses;
        return err->status;
      }
    } else if (addresses_mode(p)) {
      ++addressing;
    }
  }
  if (addressing > rank) {
    err->status = SliceStatus::TooManyParts;
    err->value = static_cast<int64_t>(addressing);
    err->extent = static_cast<int64_t>(rank);
    return err->status;
  }
  FlatSlice flat;
  const SliceStatus fs = slice_flat(layout, key, &flat, err);
  if (fs != SliceStatus::NotFlat) {
    if (fs != SliceStatus::Ok) return fs;
    out->offset = flat.offset;
    out->layout = Layout::flat(std::vector<LeafMode>(flat.leaves, flat.leaves + flat.n));
    return SliceStatus::Ok;
  }
  Slicer sl;
  sl.err = err;
  std::vector<IntTree> es, ss;
  es.reserve(rank + key.size());
  ss.reserve(rank + key.size());
  size_t m = 0;  // next mode
  auto keep_whole = [&](size_t count) {
    for (size_t k = 0; k < count; ++k, ++m) {
      es.push_back(shape[m]);
      ss.push_back(stride[m]);
    }
  };
  for (const SlicePart& p : key) {
    if (p.kind == SlicePart::Kind::Ellipsis) {
      keep_whole(rank - addressing);
      continue;
    }
    if (p.kind == SlicePart::Kind::NewAxis) {
      es.push_back(IntTree::leaf(1));
      ss.push_back(IntTree::leaf(0));
      continue;
    }
    sl.path[0] = m;
    sl.depth = 1;
    ModeOut mo;
    const SliceStatus st = sl.mode(shape[m], stride[m], p, &mo);
    if (st != SliceStatus::Ok) return st;
    if (mo.kept) {
      es.push_back(std::move(mo.shape));
      ss.push_back(std::move(mo.stride));
    }
    ++m;
  }
  keep_whole(rank - m);  // missing trailing parts: whole modes
  out->offset = sl.offset;
  out->layout = Layout(IntTree::node(std::move(es)), IntTree::node(std::move(ss)));
  return SliceStatus::Ok;
}

}  // namespace sw
