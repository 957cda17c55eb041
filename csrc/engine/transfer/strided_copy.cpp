// Host copy kernels for moves (see transfer/strided_copy.hpp).
#include "transfer/strided_copy.hpp"

#include <cstring>

#include "layout/iter.hpp"

namespace sw {

namespace {

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
  // Operand 0 is the destination, 1 the source. Merging keeps the order of
  // visits (first mode fastest), so a destination stride of 0 keeps its
  // "last write wins" outcome; a mode that is stride 0 on both sides only
  // repeats one copy and is skipped.
  JointModes<2> modes;
  for (size_t i = 0; i < extents.size(); ++i) modes.append(extents[i], {dst_strides[i], src_strides[i]}, Repeats::Skip);
  char* d0 = static_cast<char*>(dst) + dst_offset * itemsize;
  const char* s0 = static_cast<const char*>(src) + src_offset * itemsize;
  walk_runs(modes, [&](const Indices<2>& base, int64_t n, const Indices<2>& step) {
    inner_any(d0 + base[0] * itemsize, s0 + base[1] * itemsize, n, step[0] * itemsize, step[1] * itemsize,
              itemsize);
  });
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
