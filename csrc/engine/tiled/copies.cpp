// Copy planning for tiles (copies.hpp).
#include "tiled/copies.hpp"

#include <algorithm>
#include <numeric>

#include "layout/algebra.hpp"

namespace sw::tiled {

std::optional<std::pair<Leaves, Leaves>> refine(const Leaves& a, const Leaves& b) {
  Leaves ra, rb;
  size_t i = 0, j = 0;
  LeafMode pa{1, 0}, pb{1, 0};  // the parts of a[i], b[j] not yet emitted
  auto next = [](const Leaves& l, size_t& k, LeafMode& p) {
    while (k < l.size() && l[k].extent == 1) ++k;
    if (k < l.size()) p = l[k++];
    else p = {1, 0};
  };
  next(a, i, pa);
  next(b, j, pb);
  while (pa.extent > 1 && pb.extent > 1) {
    if (pa.extent == pb.extent) {
      ra.push_back(pa);
      rb.push_back(pb);
      next(a, i, pa);
      next(b, j, pb);
    } else if (pa.extent % pb.extent == 0) {
      ra.push_back({pb.extent, pa.stride});
      rb.push_back(pb);
      pa = {pa.extent / pb.extent, pa.stride * pb.extent};
      next(b, j, pb);
    } else if (pb.extent % pa.extent == 0) {
      ra.push_back(pa);
      rb.push_back({pa.extent, pb.stride});
      pb = {pb.extent / pa.extent, pb.stride * pa.extent};
      next(a, i, pa);
    } else {
      return std::nullopt;
    }
  }
  if (pa.extent != 1 || pb.extent != 1) return std::nullopt;  // different sizes
  return std::make_pair(std::move(ra), std::move(rb));
}

std::vector<Run> tile_runs(const Geometry& g, TilePlace src, TilePlace dst) {
  const int64_t T = g.tile_size();
  if (g.contiguous() || (src.packed && dst.packed)) return {{src.base, dst.base, T}};
  std::vector<Run> out;
  const int64_t run = g.run_length();
  for (int64_t j = 0; j < g.run_count(); ++j) {
    const int64_t off = g.run_offset(j);
    const Run r{src.packed ? src.base + j * run : src.base + off, dst.packed ? dst.base + j * run : dst.base + off,
                run};
    if (!out.empty() && out.back().src + out.back().count == r.src && out.back().dst + out.back().count == r.dst)
      out.back().count += run;
    else
      out.push_back(r);
  }
  return out;
}

std::optional<TileCopy> TileCopy::plan(const ModeLeaves& src, int64_t src_base, const ModeLeaves& dst,
                                       int64_t dst_base) {
  if (src.size() != dst.size()) return std::nullopt;
  TileCopy c;
  c.src_base_ = src_base;
  c.dst_base_ = dst_base;
  for (size_t i = 0; i < src.size(); ++i) {
    auto r = refine(src[i], dst[i]);
    if (!r) return std::nullopt;
    c.src_.insert(c.src_.end(), r->first.begin(), r->first.end());
    c.dst_.insert(c.dst_.end(), r->second.begin(), r->second.end());
  }
  c.size_ = size_of(c.src_);
  c.same_ = true;
  for (size_t k = 0; k < c.src_.size(); ++k) c.same_ = c.same_ && c.src_[k].stride == c.dst_[k].stride;
  // The leaves in source-stride order: a leading prefix contiguous on both
  // sides is the run; the rest are walked (source slots ascending).
  std::vector<size_t> order(c.src_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return c.src_[x].stride < c.src_[y].stride; });
  int64_t run = 1;
  size_t k = 0;
  for (; k < order.size(); ++k) {
    const LeafMode& s = c.src_[order[k]];
    const LeafMode& d = c.dst_[order[k]];
    if (s.stride != run || d.stride != run) break;
    run *= s.extent;
  }
  c.run_ = run;
  for (; k < order.size(); ++k) {
    c.rest_src_.push_back(c.src_[order[k]]);
    c.rest_dst_.push_back(c.dst_[order[k]]);
  }
  return c;
}

std::vector<Run> TileCopy::runs_list() const {
  std::vector<Run> out;
  out.reserve(static_cast<size_t>(runs()));
  for_each_run([&](int64_t s, int64_t d, int64_t n) { out.push_back({s, d, n}); });
  return out;
}

}  // namespace sw::tiled
