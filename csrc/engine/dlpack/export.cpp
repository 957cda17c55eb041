// DLPack managed-tensor construction: one block per managed tensor (see
// dlpack/export.hpp). Plain malloc/free on purpose (behind a per-thread
// free list): the deleter may run on a thread without the GIL, where the
// Python allocator must not be used.
#include "dlpack/export.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <new>

namespace sw::dlpack {

namespace {

constexpr size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Offsets of the context and of the two arrays inside the block for a struct
// of type T. int64 alignment is enough for everything in the block.
template <class T>
struct BlockLayout {
  static constexpr size_t kCtx = align_up(sizeof(T), alignof(ExportContext));
  static constexpr size_t kArrays = align_up(kCtx + sizeof(ExportContext), alignof(int64_t));
  static_assert(alignof(T) <= alignof(std::max_align_t), "malloc alignment suffices");
  static_assert(alignof(ExportContext) <= alignof(std::max_align_t), "malloc alignment suffices");
};

// Blocks of up to kCachedDims dimensions share one size and are recycled
// through a per-thread free list: a consumer that keeps many capsules alive
// at once (a list of exports) otherwise sends every malloc past glibc's
// per-thread cache to its slower bins. Freed blocks go to the freeing
// thread's list (deleters run on any thread), at most kCachedBlocks each;
// a thread's list is freed when the thread exits. Not under ASan, which
// must see every free.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRecycleBlocks = false;
#else
constexpr bool kRecycleBlocks = true;
#endif
constexpr size_t kCachedDims = 8;
constexpr size_t kCachedBlockBytes =
    std::max(BlockLayout<DLManagedTensor>::kArrays, BlockLayout<DLManagedTensorVersioned>::kArrays) +
    2 * kCachedDims * sizeof(int64_t);
constexpr size_t kCachedBlocks = 1024;

// The free list links blocks through their first word. Its state is one
// trivial thread-local (one TLS lookup per call); the reaper, whose
// destructor frees the list when the thread exits, is touched once per
// thread, when the list first gets a block. `gone` is set by the reaper
// (the state itself is trivially destructible, so it stays readable while
// other thread-local destructors free capsules): from then on blocks go
// straight to free().
struct FreeBlock {
  FreeBlock* next;
};
struct BlockList {
  FreeBlock* head;
  size_t count;
  bool gone;
  bool armed;
};
thread_local BlockList t_list = {nullptr, 0, false, false};

struct Reaper {
  ~Reaper() {
    BlockList& l = t_list;
    l.gone = true;
    while (FreeBlock* b = l.head) {
      l.head = b->next;
      std::free(b);
    }
    l.count = 0;
  }
};

void arm_reaper(BlockList& l) noexcept {
  thread_local Reaper reaper;
  (void)reaper;
  l.armed = true;
}

// The list's address, looked up once per call. Every thread_local access
// from this shared object is a __tls_get_addr call, and GCC recomputes the
// address after each branch rather than keep it in a register; the empty
// asm makes the pointer opaque, so it is kept.
inline BlockList* this_thread_list() noexcept {
  BlockList* l = &t_list;
  asm("" : "+r"(l));
  return l;
}

void* alloc_block(size_t ndim, size_t bytes) noexcept {
  if (!kRecycleBlocks || ndim > kCachedDims) return std::malloc(bytes);
  BlockList* l = this_thread_list();
  if (FreeBlock* b = l->head) {
    l->head = b->next;
    --l->count;
    return b;
  }
  return std::malloc(kCachedBlockBytes);
}

void free_block(void* block, size_t ndim) noexcept {
  if (kRecycleBlocks && ndim <= kCachedDims) {
    BlockList* l = this_thread_list();
    if (!l->gone && l->count < kCachedBlocks) {
      if (!l->armed) [[unlikely]] arm_reaper(*l);
      auto* b = static_cast<FreeBlock*>(block);
      b->next = l->head;
      l->head = b;
      ++l->count;
      return;
    }
  }
  std::free(block);
}

// Allocates the block and fills the parts both forms share; returns the
// block or nullptr. Every field is assigned, none value-initialised first:
// zeroing the structs only to overwrite them was a measurable part of an
// export's cost (benchmarks/dlpack_instructions.py).
template <class T>
T* build(const ExportSpec& spec, void* owner, OwnerRelease release_owner) noexcept {
  using L = BlockLayout<T>;
  const size_t n = spec.leaves.size();
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) return nullptr;
  if (n > (std::numeric_limits<size_t>::max() - L::kArrays) / (2 * sizeof(int64_t))) return nullptr;
  auto* bytes = static_cast<unsigned char*>(alloc_block(n, L::kArrays + 2 * n * sizeof(int64_t)));
  if (!bytes) return nullptr;
  T* self = new (bytes) T;  // default-initialised: C structs, no stores
  auto* ctx = new (bytes + L::kCtx) ExportContext;
  auto* shape = reinterpret_cast<int64_t*>(bytes + L::kArrays);
  int64_t* strides = shape + n;
  const LeafMode* leaves = spec.leaves.data();
  for (size_t i = 0; i < n; ++i) {
    shape[i] = leaves[i].extent;
    strides[i] = leaves[i].stride;
  }
  ctx->owner = owner;
  ctx->release_owner = release_owner;
  ctx->storage = spec.storage;
  // Valid (one-past-the-context) pointers even for ndim 0, which every
  // consumer accepts; NULL strides would mean "compact" to a consumer.
  ctx->shape = shape;
  ctx->strides = strides;
  ctx->ndim = static_cast<int32_t>(n);
  self->manager_ctx = ctx;
  DLTensor& t = self->dl_tensor;
  t.data = spec.data;
  t.device = spec.device;
  t.ndim = static_cast<int32_t>(n);
  t.dtype = spec.dtype;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = spec.byte_offset;
  return self;
}

// Frees the block first, then the storage reference (atomic work and at most
// an unmap/free: fine on any thread), then releases the owner: the owner
// callback may run arbitrary teardown, and nothing in the block is needed by
// then.
void destroy(void* block, ExportContext* ctx) noexcept {
  void* owner = ctx->owner;
  OwnerRelease release_owner = ctx->release_owner;
  StorageControl* storage = ctx->storage;
  free_block(block, static_cast<size_t>(ctx->ndim));
  drop_export_ref(storage);
  if (release_owner) release_owner(owner);
}

}  // namespace

extern "C" void sw_dlpack_legacy_deleter(DLManagedTensor* self) {
  if (!self) return;
  destroy(self, static_cast<ExportContext*>(self->manager_ctx));
}

extern "C" void sw_dlpack_versioned_deleter(DLManagedTensorVersioned* self) {
  if (!self) return;
  destroy(self, static_cast<ExportContext*>(self->manager_ctx));
}

DLManagedTensor* make_legacy(const ExportSpec& spec, void* owner, OwnerRelease release_owner) noexcept {
  DLManagedTensor* self = build<DLManagedTensor>(spec, owner, release_owner);
  if (!self) return nullptr;
  self->deleter = sw_dlpack_legacy_deleter;
  return self;
}

DLManagedTensorVersioned* make_versioned(const ExportSpec& spec, void* owner,
                                         OwnerRelease release_owner) noexcept {
  DLManagedTensorVersioned* self = build<DLManagedTensorVersioned>(spec, owner, release_owner);
  if (!self) return nullptr;
  // Capped at 1.0 whatever the consumer's ceiling: that is what we implement.
  self->version = DLPackVersion{1, 0};
  self->flags = spec.read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  self->deleter = sw_dlpack_versioned_deleter;
  return self;
}

// ------------------------------------------------------- export decisions

bool device_matches(const IntPair& want, DLDevice have) noexcept {
  return !want.overflow[0] && !want.overflow[1] && want.value[0] == have.device_type &&
         want.value[1] == have.device_id;
}

bool fits_int32(long long v) noexcept {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

bool fits_pointer(unsigned long long v) noexcept { return v <= std::numeric_limits<uintptr_t>::max(); }

const char* cpu_move_dtype_arg(DTypeCode code) noexcept {
  switch (code) {
    case DTypeCode::Float32: return "";
    case DTypeCode::Int32: return ", dtype=strideweave.DType.Int32";
    case DTypeCode::Bool: return ", dtype=strideweave.DType.Bool";
    default: return nullptr;
  }
}

int64_t* dims_block(std::span<const LeafMode> leaves) noexcept {
  const size_t ndim = leaves.size();
  if (ndim == 0 || ndim > std::numeric_limits<size_t>::max() / (2 * sizeof(int64_t))) return nullptr;
  auto* dims = static_cast<int64_t*>(std::malloc(2 * ndim * sizeof(int64_t)));
  if (!dims) return nullptr;
  for (size_t i = 0; i < ndim; ++i) {
    dims[i] = leaves[i].extent;
    dims[ndim + i] = leaves[i].stride;
  }
  return dims;
}

void fill_dltensor(const ExportSpec& spec, const int64_t* dims, DLTensor* out) noexcept {
  const size_t ndim = spec.leaves.size();
  out->data = spec.data;
  out->device = spec.device;
  out->ndim = static_cast<int32_t>(ndim);
  out->dtype = spec.dtype;
  out->shape = const_cast<int64_t*>(dims);
  out->strides = const_cast<int64_t*>(dims + ndim);
  out->byte_offset = spec.byte_offset;
}

}  // namespace sw::dlpack
