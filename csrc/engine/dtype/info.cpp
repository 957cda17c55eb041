// The built-in dtype table (dtype/info.hpp).
#include "dtype/info.hpp"

namespace sw {

namespace {

constexpr DTypeInfo kBuiltins[] = {
    {DTypeCode::Any, "Any", 0, std::nullopt, true},
    {DTypeCode::Floating, "Floating", 0, DTypeCode::Any, true},
    {DTypeCode::Integer, "Integer", 0, DTypeCode::Any, true},
    {DTypeCode::Float32, "Float32", 32, DTypeCode::Floating, false},
    {DTypeCode::Float64, "Float64", 64, DTypeCode::Floating, false},
    {DTypeCode::Int32, "Int32", 32, DTypeCode::Integer, false},
    {DTypeCode::Bool, "Bool", 8, DTypeCode::Any, false},
};

}  // namespace

std::span<const DTypeInfo, kBuiltinDTypeCount> builtin_dtypes() noexcept { return kBuiltins; }

const DTypeInfo* dtype_info(DTypeCode code) noexcept {
  for (const DTypeInfo& b : kBuiltins)
    if (b.code == code) return &b;
  return nullptr;
}

std::optional<DTypeCode> dtype_from_name(std::string_view name) noexcept {
  for (const DTypeInfo& b : kBuiltins)
    if (name == b.name) return b.code;
  return numpy_dtype_from_name(name);
}

std::optional<DTypeCode> numpy_dtype_from_name(std::string_view name) noexcept {
  if (name == "float32") return DTypeCode::Float32;
  if (name == "float64") return DTypeCode::Float64;
  if (name == "int32") return DTypeCode::Int32;
  if (name == "bool" || name == "bool_") return DTypeCode::Bool;
  return std::nullopt;
}

const char* dtype_name(DTypeCode code) noexcept {
  const DTypeInfo* b = dtype_info(code);
  return b ? b->name : "CompoundDType";
}

bool dtype_is_simple(DTypeCode code) noexcept {
  const DTypeInfo* b = dtype_info(code);
  return b && !b->category;
}

bool dtype_is_category(DTypeCode code) noexcept {
  const DTypeInfo* b = dtype_info(code);
  return b && b->category;
}

std::optional<DTypeCode> dtype_supertype(DTypeCode code) noexcept {
  const DTypeInfo* b = dtype_info(code);
  return b ? b->supertype : std::optional<DTypeCode>(DTypeCode::Any);
}

bool dtype_is_subtype_of(DTypeCode code, DTypeCode of) noexcept {
  if (of == DTypeCode::Compound) return false;
  for (std::optional<DTypeCode> cur = code; cur; cur = dtype_supertype(*cur))
    if (*cur == of) return true;
  return false;
}

bool dtype_is_differentiable(DTypeCode code) noexcept {
  return code == DTypeCode::Float32 || code == DTypeCode::Float64 || code == DTypeCode::Floating;
}

const char* numpy_dtype_name(DTypeCode code) noexcept {
  switch (code) {
    case DTypeCode::Float32: return "float32";
    case DTypeCode::Int32: return "int32";
    case DTypeCode::Bool: return "bool";
    case DTypeCode::Floating:
    case DTypeCode::Float64: return "float64";
    default: return "object";
  }
}

}  // namespace sw
