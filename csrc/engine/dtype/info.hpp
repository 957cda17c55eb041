// The built-in dtype table: names, widths, the supertype hierarchy and the
// predicates the binding's DType objects answer (API.md section 3). A
// CompoundDType instance has code Compound; its supertype is Any and its
// identity (which subclass) is the binding's business.
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "dtype/dtype.hpp"

namespace sw {

struct DTypeInfo {
  DTypeCode code;
  const char* name;
  int bits;                           // 0: no fixed width (categories)
  std::optional<DTypeCode> supertype; // none for Any
  bool category;                      // Any, Floating, Integer
};

// Every built-in dtype in declaration order (the DType.<name> singletons).
inline constexpr size_t kBuiltinDTypeCount = 7;
std::span<const DTypeInfo, kBuiltinDTypeCount> builtin_dtypes() noexcept;
// The table row of a built-in; nullptr for Compound.
const DTypeInfo* dtype_info(DTypeCode code) noexcept;
// DType.from_name(): a built-in by its exact name, or by the NumPy name of
// the same element type (numpy_dtype_from_name).
std::optional<DTypeCode> dtype_from_name(std::string_view name) noexcept;
// The built-in a NumPy dtype name stands for: "float32", "float64",
// "int32", "bool" (and NumPy 1's "bool_"); none for every other name.
std::optional<DTypeCode> numpy_dtype_from_name(std::string_view name) noexcept;
// The built-in's name ("Float32"); "CompoundDType" for Compound.
const char* dtype_name(DTypeCode code) noexcept;

// A storage dtype with a fixed width (Float32, Float64, Int32, Bool).
bool dtype_is_simple(DTypeCode code) noexcept;
bool dtype_is_category(DTypeCode code) noexcept;
// The parent in the hierarchy (Compound -> Any); none for Any.
std::optional<DTypeCode> dtype_supertype(DTypeCode code) noexcept;
// True when of is code or one of its supertypes. Two Compound codes are not
// compared here (the binding compares their classes).
bool dtype_is_subtype_of(DTypeCode code, DTypeCode of) noexcept;
// Gradients exist for Float32, Float64 and Floating tensors.
bool dtype_is_differentiable(DTypeCode code) noexcept;
// The NumPy dtype name a tensor's values convert to ("object" for dtypes
// NumPy has no slot type for).
const char* numpy_dtype_name(DTypeCode code) noexcept;

}  // namespace sw
