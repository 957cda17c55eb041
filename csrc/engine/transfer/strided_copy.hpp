// Host copy kernels for moves: a physical span copy and a strided copy of the
// logical elements of a layout between two host buffers of one item size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "layout/layout.hpp"

namespace sw {

// Copies count items of itemsize bytes (the whole physical span, holes
// included).
void copy_span(void* dst, const void* src, int64_t count, int itemsize);

// For every coordinate of extents (first mode fastest), copies the item at
// src_offset + sum(coord * src_strides) to dst_offset + sum(coord *
// dst_strides). Slots neither stride set reaches are left untouched. All
// three vectors have one entry per leaf mode; strides may be zero.
void strided_copy(void* dst, int64_t dst_offset, const std::vector<int64_t>& dst_strides,
                  const void* src, int64_t src_offset, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& extents, int itemsize);

// Same layout on both sides: the logical elements of layout, read from
// src_offset and written to dst_offset.
void strided_copy(void* dst, int64_t dst_offset, const void* src, int64_t src_offset,
                  const Layout& layout, int itemsize);

}  // namespace sw
