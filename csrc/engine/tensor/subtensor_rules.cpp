// Tensor and TensorRepresentation validity rules (tensor/subtensor_rules.hpp).
#include "tensor/subtensor_rules.hpp"

namespace sw {

OffsetCheck check_offset(long long value, int overflow, int64_t max_offset) noexcept {
  // On overflow value is -1, so the sign comes from overflow first: a huge
  // positive offset is out of range, not negative.
  if (overflow < 0 || (overflow == 0 && value < 0)) return OffsetCheck::Negative;
  if (overflow > 0 || value > max_offset) return OffsetCheck::TooLarge;
  return OffsetCheck::Ok;
}

RepresentationForm classify_representation(bool compound, size_t planes, size_t subtensors,
                                           size_t adjacent) noexcept {
  if (subtensors == 0) return RepresentationForm::NoSubtensors;
  if (!compound) return subtensors == 1 && adjacent == 0 ? RepresentationForm::Single
                                                         : RepresentationForm::NeedsCompound;
  if (planes != subtensors) return RepresentationForm::PlaneCount;
  if (adjacent != subtensors - 1) return RepresentationForm::AdjacentCount;
  return RepresentationForm::Multi;
}

bool adjacent_fits(const Layout& adjacent, const Layout& subtensor) noexcept {
  return adjacent.shape() == subtensor.shape();
}

}  // namespace sw
