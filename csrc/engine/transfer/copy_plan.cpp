// Copy planning for moves (see copy_plan.hpp).
#include "transfer/copy_plan.hpp"

#include <sys/uio.h>
#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "files/io.hpp"
#include "transfer/strided_copy.hpp"

namespace sw {

namespace {

using Kind = CopyEndpoint::Kind;

bool same_native_item(const CopyEndpoint& a, const CopyEndpoint& b) {
  return a.itemsize > 0 && a.itemsize == b.itemsize;
}

// True when the layout maps its coordinates one to one onto slots
// [0, size): its modes (extent-1 ones aside), taken by increasing stride,
// pack each other without gaps or overlap. Such a layout's logical copy
// into the same layout is exactly the copy of that span.
bool packs_its_span(const std::vector<LeafMode>& leaves) {
  LeafMode modes[8];
  size_t n = 0;
  for (const LeafMode& m : leaves) {
    if (m.extent == 1) continue;
    if (m.extent < 1 || m.stride < 1 || n == 8) return false;
    modes[n++] = m;
  }
  for (size_t k = 1; k < n; ++k)  // insertion sort by stride: at most 8 modes
    for (size_t j = k; j > 0 && modes[j].stride < modes[j - 1].stride; --j) std::swap(modes[j], modes[j - 1]);
  int64_t expected = 1;
  for (size_t k = 0; k < n; ++k) {
    if (modes[k].stride != expected) return false;
    expected *= modes[k].extent;
  }
  return true;
}

}  // namespace

const char* to_string(CopyPlanKind k) {
  switch (k) {
    case CopyPlanKind::None: return "none";
    case CopyPlanKind::HostToHost: return "host-to-host span";
    case CopyPlanKind::HostToFile: return "host-to-file span";
    case CopyPlanKind::FileToHost: return "file-to-host span";
    case CopyPlanKind::FileToFile: return "file-to-file span";
    case CopyPlanKind::HostStrided: return "strided host copy";
  }
  return "unknown";
}

CopyPlan CopyPlan::span(const CopyEndpoint& src, int64_t src_offset, const CopyEndpoint& dst, int64_t dst_offset,
                        int64_t count) {
  CopyPlan p;
  if (!same_native_item(src, dst)) return p;
  if (src.kind == Kind::Host && dst.kind == Kind::File)
    p.kind_ = CopyPlanKind::HostToFile;
  else if (src.kind == Kind::File && dst.kind == Kind::Host)
    p.kind_ = CopyPlanKind::FileToHost;
  else if (src.kind == Kind::File && dst.kind == Kind::File)
    p.kind_ = CopyPlanKind::FileToFile;
  else if (src.kind == Kind::Host && dst.kind == Kind::Host)
    p.kind_ = CopyPlanKind::HostToHost;
  else
    return p;
  p.src_ = src;
  p.dst_ = dst;
  p.src_offset_ = src_offset;
  p.dst_offset_ = dst_offset;
  p.count_ = count;
  return p;
}

CopyPlan CopyPlan::logical(const CopyEndpoint& src, int64_t src_offset, const Layout& src_layout,
                           const CopyEndpoint& dst, int64_t dst_offset, const Layout& dst_layout) {
  if (!same_native_item(src, dst)) return CopyPlan();
  if (src.kind == Kind::Host && dst.kind == Kind::Host) {
    const auto& sl = src_layout.leaves();
    const auto& dl = dst_layout.leaves();
    if (sl.size() != dl.size()) return CopyPlan();
    // The common case (a dense tensor into the same layout) is one memmove.
    if (sl == dl && packs_its_span(sl)) return span(src, src_offset, dst, dst_offset, src_layout.size());
    CopyPlan p;
    p.kind_ = CopyPlanKind::HostStrided;
    p.src_ = src;
    p.dst_ = dst;
    p.src_offset_ = src_offset;
    p.dst_offset_ = dst_offset;
    p.count_ = src_layout.size();
    p.same_layout_ = src_layout == dst_layout;
    p.extents_.reserve(sl.size());
    p.src_strides_.reserve(sl.size());
    p.dst_strides_.reserve(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
      p.extents_.push_back(sl[k].extent);
      p.src_strides_.push_back(sl[k].stride);
      p.dst_strides_.push_back(dl[k].stride);
    }
    return p;
  }
  // A file is reached by spans only: the same layout on both sides makes the
  // logical copy the physical span.
  if (src_layout == dst_layout) return span(src, src_offset, dst, dst_offset, src_layout.cosize());
  return CopyPlan();
}

std::vector<CopyPlan> CopyPlan::split(int pieces, int64_t min_bytes) const {
  std::vector<CopyPlan> out;
  const int64_t total = bytes();
  int64_t ways = pieces;
  if (min_bytes > 0) ways = std::min<int64_t>(ways, total / min_bytes);
  if (kind_ == CopyPlanKind::HostToHost && ways >= 2) {
    // Page-multiple cuts: no two threads fault in or write one page.
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max(1, src_.itemsize));
    int64_t step = (count_ + ways - 1) / ways;
    step = (step + grain - 1) / grain * grain;
    for (int64_t first = 0; first < count_; first += step) {
      CopyPlan p = *this;
      p.src_offset_ = src_offset_ + first;
      p.dst_offset_ = dst_offset_ + first;
      p.count_ = std::min(step, count_ - first);
      out.push_back(std::move(p));
    }
    return out;
  }
  if (kind_ == CopyPlanKind::HostStrided && same_layout_ && ways >= 2 && !extents_.empty()) {
    // Cut the longest mode (the slowest of equals): each piece is the same
    // box with that mode narrowed and both offsets advanced to its start.
    size_t k = 0;
    for (size_t i = 0; i < extents_.size(); ++i)
      if (extents_[i] >= extents_[k]) k = i;
    const int64_t extent = extents_[k];
    ways = std::min(ways, extent);
    if (ways >= 2) {
      const int64_t step = (extent + ways - 1) / ways;
      for (int64_t first = 0; first < extent; first += step) {
        CopyPlan p = *this;
        const int64_t n = std::min(step, extent - first);
        p.src_offset_ = src_offset_ + first * src_strides_[k];
        p.dst_offset_ = dst_offset_ + first * dst_strides_[k];
        p.extents_[k] = n;
        p.count_ = count_ / extent * n;
        out.push_back(std::move(p));
      }
      return out;
    }
  }
  out.push_back(*this);
  return out;
}

void CopyPlan::run() const {
  const int item = src_.itemsize;
  switch (kind_) {
    case CopyPlanKind::None:
      throw std::logic_error("no native copy plan to run");
    case CopyPlanKind::HostToHost:
      copy_span(dst_.host + dst_offset_ * item, src_.host + src_offset_ * item, count_, item);
      return;
    case CopyPlanKind::HostToFile:
      file_write_span(*dst_.file, dst_offset_, src_.host + src_offset_ * item, count_, item);
      return;
    case CopyPlanKind::FileToHost:
      file_read_span(*src_.file, src_offset_, dst_.host + dst_offset_ * item, count_, item);
      return;
    case CopyPlanKind::FileToFile:
      file_copy_span(*src_.file, src_offset_, *dst_.file, dst_offset_, count_, item);
      return;
    case CopyPlanKind::HostStrided:
      strided_copy(dst_.host, dst_offset_, dst_strides_, src_.host, src_offset_, src_strides_, extents_, item);
      return;
  }
}

std::exception_ptr CopyPlan::run_captured() const noexcept {
  try {
    run();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

std::vector<std::vector<size_t>> vectored_groups(const std::vector<const CopyPlan*>& plans) {
  // (file, direction, first byte in the file, plan index) for every span
  // with one file side; sorted, a group is a run of neighbours that touch.
  using Key = std::tuple<const FileStorage*, bool, int64_t, size_t>;
  std::vector<Key> keys;
  for (size_t i = 0; i < plans.size(); ++i) {
    const CopyPlan& p = *plans[i];
    const int64_t item = p.src_.itemsize;
    if (p.kind_ == CopyPlanKind::FileToHost) keys.emplace_back(p.src_.file, false, p.src_offset_ * item, i);
    if (p.kind_ == CopyPlanKind::HostToFile) keys.emplace_back(p.dst_.file, true, p.dst_offset_ * item, i);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::vector<size_t>> groups;
  int64_t end = -1;
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto& [file, write, first, i] = keys[k];
    const bool joins = k > 0 && std::get<0>(keys[k - 1]) == file && std::get<1>(keys[k - 1]) == write && first == end;
    if (!joins) groups.emplace_back();
    groups.back().push_back(i);
    end = first + plans[i]->bytes();
  }
  return groups;
}

void run_independent(const std::vector<const CopyPlan*>& plans) {
  std::vector<bool> grouped(plans.size(), false);
  std::vector<::iovec> iov;
  for (const std::vector<size_t>& g : vectored_groups(plans)) {
    const CopyPlan& head = *plans[g.front()];
    const bool write = head.kind_ == CopyPlanKind::HostToFile;
    iov.clear();
    for (size_t i : g) {
      const CopyPlan& p = *plans[i];
      char* host = write ? p.src_.host + p.src_offset_ * p.src_.itemsize : p.dst_.host + p.dst_offset_ * p.dst_.itemsize;
      iov.push_back(::iovec{host, static_cast<size_t>(p.bytes())});
      grouped[i] = true;
    }
    const int64_t at = (write ? head.dst_offset_ : head.src_offset_) * head.src_.itemsize;
    if (write)
      head.dst_.file->write_pieces(at, iov.data(), static_cast<int>(iov.size()));
    else
      head.src_.file->read_pieces(at, iov.data(), static_cast<int>(iov.size()));
  }
  for (size_t i = 0; i < plans.size(); ++i)
    if (!grouped[i]) plans[i]->run();
}

}  // namespace sw
