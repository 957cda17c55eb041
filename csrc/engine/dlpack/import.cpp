// DLPack import decisions and copies (see dlpack/import.hpp).
#include "dlpack/import.hpp"

#include <cstring>
#include <stdexcept>

#include "data/convert.hpp"

namespace sw::dlpack {

namespace {

// The deleter calls handed to an adopting AlignedBuffer: ctx is the managed
// tensor itself, so adoption allocates nothing.
void run_legacy_deleter(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter) m->deleter(m);
}

void run_versioned_deleter(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensorVersioned*>(ctx);
  if (m->deleter) m->deleter(m);
}

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

ScalarFormat format_of(DTypeCode code) {
  switch (code) {
    case DTypeCode::Int32: return ScalarFormat{ScalarKind::Signed, 4, false};
    case DTypeCode::Bool: return ScalarFormat{ScalarKind::Bool, 1, false};
    default: return ScalarFormat{ScalarKind::Float, 4, false};
  }
}

ImportView malformed(ImportView v, const char* why) {
  v.check = ImportCheck::Malformed;
  v.malformed = why;
  return v;
}

}  // namespace

void ImportedTensor::reset() noexcept {
  void* m = m_;
  m_ = nullptr;
  if (!m) return;
  if (versioned_)
    run_versioned_deleter(m);
  else
    run_legacy_deleter(m);
}

ForeignRelease ImportedTensor::hand_over() noexcept {
  ForeignRelease r{versioned_ ? run_versioned_deleter : run_legacy_deleter, m_};
  m_ = nullptr;
  return r;
}

bool is_host_device(int32_t device_type) noexcept {
  return device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLROCMHost;
}

bool storage_dtype_for(DLDataType t, DTypeCode* out) noexcept {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32) *out = DTypeCode::Float32;
  else if (t.code == kDLInt && t.bits == 32) *out = DTypeCode::Int32;
  else if (t.code == kDLBool && t.bits == 8) *out = DTypeCode::Bool;
  else return false;
  return true;
}

std::string dtype_text(DLDataType t) {
  std::string s;
  switch (t.code) {
    case kDLInt: s = "int"; break;
    case kDLUInt: s = "uint"; break;
    case kDLFloat: s = "float"; break;
    case kDLBfloat: s = "bfloat"; break;
    case kDLComplex: s = "complex"; break;
    case kDLBool: s = "bool"; break;
    case kDLOpaqueHandle: s = "opaque handle "; break;
    default:
      // The float8/6/4 variants and codes newer than this header.
      // (Appended piecewise: GCC 12 misreads `"..." + std::string&&`.)
      s = "code ";
      s += std::to_string(t.code);
      s += ", ";
      s += std::to_string(t.bits);
      s += " bits";
      if (t.lanes != 1) {
        s += ", ";
        s += std::to_string(t.lanes);
        s += " lanes";
      }
      return s;
  }
  if (t.code != kDLBool || t.bits != 8) s += std::to_string(t.bits);
  if (t.lanes != 1) {
    s += "x";
    s += std::to_string(t.lanes);
  }
  return s;
}

const char* conversion_target(DLDataType t) noexcept {
  if (t.code == kDLInt || t.code == kDLUInt) return "int32";
  if (t.code == kDLBool) return "bool";
  return "float32";
}

int64_t ImportView::row_major_stride(int32_t i) const noexcept {
  int64_t s = 1;  // fits: the size did
  for (int32_t k = ndim - 1; k > i; --k) s *= shape[k] > 0 ? shape[k] : 1;
  return s;
}

ImportView inspect_import(const DLTensor& t) noexcept {
  ImportView v;
  if (!storage_dtype_for(t.dtype, &v.dtype)) {
    v.check = ImportCheck::Dtype;
    return v;
  }
  if (t.ndim < 0) return malformed(v, "a negative ndim");
  v.ndim = t.ndim;
  if (t.ndim > 0 && !t.shape) return malformed(v, "no shape array");
  v.shape = t.shape;
  v.strides = t.strides;
  // The size, and the span a view covers from its first element, in one
  // pass (this runs on every import). An extent of 0 empties the tensor
  // whatever the others multiply to, so size overflow is judged after.
  int64_t size = 1, reach = 0;
  bool empty = false, negative = false, size_overflow = false, span_overflow = false;
  for (int32_t i = 0; i < t.ndim; ++i) {
    const int64_t e = t.shape[i];
    if (e <= 1) {
      if (e < 0) return malformed(v, "a negative extent");
      empty = empty || e == 0;
      continue;
    }
    size_overflow = size_overflow || !mul_ok(size, e, &size);
    const int64_t s = v.stride(i);
    if (s < 0) {
      negative = true;
      continue;
    }
    int64_t r;
    span_overflow = span_overflow || !mul_ok(s, e - 1, &r) || !add_ok(reach, r, &reach);
  }
  // The span is reach + 1 slots: a reach of INT64_MAX has no span.
  const bool too_large = !empty && (size_overflow || span_overflow || reach == INT64_MAX);
  if (too_large) {
    v.check = ImportCheck::TooLarge;
    return v;
  }
  v.size = empty ? 0 : size;
  v.span = empty ? 0 : reach + 1;
  const int64_t item = itemsize(v.dtype);
  int64_t span_bytes = 0;
  if (!mul_ok(v.span, item, &span_bytes)) {
    v.check = ImportCheck::TooLarge;
    return v;
  }
  if (!is_host_device(t.device.device_type)) {
    // Never dereferenced: the memory is elsewhere.
    v.check = ImportCheck::NotHost;
    return v;
  }
  if (v.size > 0 && !t.data) return malformed(v, "a null data pointer for a tensor with elements");
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  uintptr_t first, end;
  if (__builtin_add_overflow(base, static_cast<uintptr_t>(t.byte_offset), &first) ||
      __builtin_add_overflow(first, static_cast<uintptr_t>(span_bytes), &end))
    return malformed(v, "a byte_offset past the end of the address space");
  v.first = reinterpret_cast<unsigned char*>(first);
  // Without elements nothing is read: any strides and any address view.
  if (negative && v.size > 0) v.check = ImportCheck::NegativeStride;
  // (Item sizes are powers of two: a mask, not a division, on every import.)
  else if (v.size > 0 && (first & static_cast<uintptr_t>(item - 1)) != 0) v.check = ImportCheck::Misaligned;
  else v.check = ImportCheck::View;
  return v;
}

void import_leaves(const ImportView& v, std::vector<LeafMode>* out) {
  out->resize(static_cast<size_t>(v.ndim));
  for (int32_t i = 0; i < v.ndim; ++i) (*out)[static_cast<size_t>(i)] = v.leaf(i);
}

void row_major_leaves(const ImportView& v, std::vector<LeafMode>* out) {
  out->resize(static_cast<size_t>(v.ndim));
  int64_t s = 1;
  for (int32_t i = v.ndim; i-- > 0;) {
    (*out)[static_cast<size_t>(i)] = LeafMode{v.shape[i], s};
    s *= v.shape[i] > 0 ? v.shape[i] : 1;
  }
}

Layout flat_layout(const std::vector<LeafMode>& leaves) {
  std::vector<IntTree> shape, stride;
  shape.reserve(leaves.size());
  stride.reserve(leaves.size());
  for (const LeafMode& m : leaves) {
    shape.push_back(IntTree::leaf(m.extent));
    stride.push_back(IntTree::leaf(m.stride));
  }
  return Layout(IntTree::node(std::move(shape)), IntTree::node(std::move(stride)));
}

void copy_row_major(const ImportView& v, void* dst) {
  if (v.size == 0) return;
  const int64_t item = itemsize(v.dtype);
  // Small fixed arrays cover every practical rank without allocating.
  constexpr int kStack = 32;
  int64_t dst_stack[kStack], src_stack[kStack];
  std::vector<int64_t> dst_heap, src_heap;
  int64_t* dst_strides = dst_stack;
  int64_t* src_bytes = src_stack;
  if (v.ndim > kStack) {
    dst_heap.resize(static_cast<size_t>(v.ndim));
    src_heap.resize(static_cast<size_t>(v.ndim));
    dst_strides = dst_heap.data();
    src_bytes = src_heap.data();
  }
  int64_t s = 1;
  for (int32_t i = v.ndim; i-- > 0;) {
    dst_strides[i] = s;
    s *= v.shape[i];
    src_bytes[i] = v.stride(i) * item;
  }
  // Same dtype in and out: convert_strided only moves the bytes (a memcpy
  // for contiguous data); it cannot fail for these formats.
  convert_strided(dst, v.dtype, dst_strides, v.first, format_of(v.dtype), src_bytes, v.shape, v.ndim);
}

}  // namespace sw::dlpack
