// What makes a (carrier, offset, layout) triple a valid tensor, and a list
// of them a valid TensorRepresentation (API.md sections 4 and 13), over
// plain values: the binding reads the Python objects (carrier hooks
// included, in its own order) and raises the exceptions.
#pragma once
#include <cstddef>
#include <cstdint>

#include "layout/layout.hpp"

namespace sw {

// The slots offset .. offset + cosize - 1 lie inside a carrier of
// carrier_slots slots. Compared as offset <= slots - cosize: offset + cosize
// may exceed INT64_MAX. Inline: every export and Tensor() checks it.
inline bool span_fits(int64_t offset, int64_t carrier_slots, int64_t cosize) noexcept {
  return offset <= carrier_slots - cosize;
}

// A Tensor(carrier, offset, layout) offset as PyLong_AsLongLongAndOverflow
// gave it (overflow: +1 above, -1 below the long long range): non-negative
// and at most max_offset (the binding's Py_ssize_t).
enum class OffsetCheck : uint8_t { Ok, Negative, TooLarge };
OffsetCheck check_offset(long long value, int overflow, int64_t max_offset) noexcept;

// The counts of a representation: a simple logical dtype takes exactly one
// subtensor and no adjacent layouts (an ordinary tensor); a compound one
// takes one subtensor per plane and one adjacent layout between each two.
enum class RepresentationForm : uint8_t {
  Single,         // an ordinary tensor
  Multi,          // one subtensor per plane of a compound dtype
  NoSubtensors,
  NeedsCompound,  // several subtensors (or adjacent layouts) for a simple dtype
  PlaneCount,     // subtensors != planes
  AdjacentCount,  // adjacent layouts != subtensors - 1
};
RepresentationForm classify_representation(bool compound, size_t planes, size_t subtensors,
                                           size_t adjacent) noexcept;

// Adjacent layout i maps subtensor i's coordinates: its domain is that
// subtensor's shape.
bool adjacent_fits(const Layout& adjacent, const Layout& subtensor) noexcept;

}  // namespace sw
