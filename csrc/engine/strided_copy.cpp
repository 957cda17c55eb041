// Host copy kernels for moves (see strided_copy.hpp).
#include "strided_copy.hpp"

#include <cstring>

namespace sw {

namespace {

struct Mode {
  int64_t extent, src, dst;
};

// Drops extent-1 modes and merges a mode into its faster neighbour when both
// sides continue it contiguously, so a compact layout becomes one run. The
// order of visits (first mode fastest) is preserved, which keeps the "last
// write wins" outcome for a destination stride of zero.
std::vector<Mode> coalesce(const std::vector<int64_t>& extents, const std::vector<int64_t>& src,
                           const std::vector<int64_t>& dst) {
  std::vector<Mode> out;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] == 1) continue;
    Mode m{extents[i], src[i], dst[i]};
    if (!out.empty()) {
      Mode& b = out.back();
      if (m.src == b.src * b.extent && m.dst == b.dst * b.extent) {
        b.extent *= m.extent;
        continue;
      }
    }
    out.push_back(m);
  }
  return out;
}

template <class T>
void inner(char* d, const char* s, int64_t n, int64_t ds, int64_t ss) {
  // Item-sized loads/stores through memcpy keep this free of alignment and
  // aliasing assumptions; compilers lower them to plain moves.
  for (int64_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, s + k * ss, sizeof(T));
    std::memcpy(d + k * ds, &v, sizeof(T));
  }
}

void inner_any(char* d, const char* s, int64_t n, int64_t ds, int64_t ss, int itemsize) {
  if (ds == itemsize && ss == itemsize) {
    std::memcpy(d, s, static_cast<size_t>(n * itemsize));
    return;
  }
  switch (itemsize) {
    case 1: inner<uint8_t>(d, s, n, ds, ss); return;
    case 2: inner<uint16_t>(d, s, n, ds, ss); return;
    case 4: inner<uint32_t>(d, s, n, ds, ss); return;
    case 8: inner<uint64_t>(d, s, n, ds, ss); return;
    default:
      for (int64_t k = 0; k < n; ++k) std::memcpy(d + k * ds, s + k * ss, static_cast<size_t>(itemsize));
  }
}

}  // namespace

void copy_span(void* dst, const void* src, int64_t count, int itemsize) {
  if (count <= 0) return;
  std::memmove(dst, src, static_cast<size_t>(count) * static_cast<size_t>(itemsize));
}

void strided_copy(void* dst, int64_t dst_offset, const std::vector<int64_t>& dst_strides,
                  const void* src, int64_t src_offset, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& extents, int itemsize) {
  for (int64_t e : extents)
    if (e <= 0) return;  // nothing to copy
  std::vector<Mode> modes = coalesce(extents, src_strides, dst_strides);
  char* d0 = static_cast<char*>(dst) + dst_offset * itemsize;
  const char* s0 = static_cast<const char*>(src) + src_offset * itemsize;
  if (modes.empty()) {  // a single element
    std::memcpy(d0, s0, static_cast<size_t>(itemsize));
    return;
  }
  const Mode in = modes[0];
  const int64_t ids = in.dst * itemsize, iss = in.src * itemsize;
  const size_t outer_n = modes.size() - 1;
  if (outer_n == 0) {
    inner_any(d0, s0, in.extent, ids, iss, itemsize);
    return;
  }
  // Odometer over the outer modes; byte offsets are kept incrementally.
  std::vector<int64_t> coord(outer_n, 0);
  int64_t doff = 0, soff = 0;
  for (;;) {
    inner_any(d0 + doff, s0 + soff, in.extent, ids, iss, itemsize);
    size_t k = 0;
    for (; k < outer_n; ++k) {
      const Mode& m = modes[k + 1];
      if (++coord[k] < m.extent) {
        doff += m.dst * itemsize;
        soff += m.src * itemsize;
        break;
      }
      doff -= m.dst * itemsize * (m.extent - 1);
      soff -= m.src * itemsize * (m.extent - 1);
      coord[k] = 0;
    }
    if (k == outer_n) return;
  }
}

void strided_copy(void* dst, int64_t dst_offset, const void* src, int64_t src_offset,
                  const Layout& layout, int itemsize) {
  std::vector<int64_t> extents, strides;
  extents.reserve(layout.leaves().size());
  strides.reserve(layout.leaves().size());
  for (const auto& m : layout.leaves()) {
    extents.push_back(m.extent);
    strides.push_back(m.stride);
  }
  strided_copy(dst, dst_offset, strides, src, src_offset, strides, extents, itemsize);
}

}  // namespace sw
