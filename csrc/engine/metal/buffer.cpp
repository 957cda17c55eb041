#include "metal/buffer.hpp"

#include <cstdint>
#include <new>

namespace sw::metal {

namespace {

// Runs one device step, naming it in a DeviceError.
template <class F>
void step(const char* name, F&& f) {
  try {
    f();
  } catch (const DeviceError& e) {
    throw StepError(name, e.what());
  }
}

size_t bytes_of(int64_t slots, int item) { return static_cast<size_t>(slots) * static_cast<size_t>(item); }

bool in_range(const SpanEnd& e, int64_t count) {
  return e.offset >= 0 && e.offset <= e.size && count <= e.size - e.offset;
}

}  // namespace

void read_slot(const BufferView& v, int64_t i, void* out) {
  step("copy to host", [&] { v.rt->copy_to_host(out, v.id, bytes_of(i, v.item), bytes_of(1, v.item)); });
  step("synchronization", [&] { v.rt->synchronize(); });
}

void write_slot(const BufferView& v, int64_t i, const void* in) {
  step("copy to device", [&] { v.rt->copy_to_device(v.id, bytes_of(i, v.item), in, bytes_of(1, v.item)); });
}

void write_slots(const BufferView& v, const void* in, int64_t n) {
  if (n <= 0) return;
  step("copy to device", [&] { v.rt->copy_to_device(v.id, 0, in, bytes_of(n, v.item)); });
}

void copy_span(const SpanEnd& src, const SpanEnd& dst, int64_t count, int item) {
  if (count < 0 || !in_range(src, count) || !in_range(dst, count))
    throw std::invalid_argument("_copy() element_count exceeds a carrier");
  if (count == 0) return;
  if (!src.device && !dst.device) throw std::invalid_argument("a Metal span copy needs a device end");
  if (src.device && dst.device && src.device->rt != dst.device->rt)
    throw std::runtime_error("Metal carriers of different runtimes cannot copy to each other");
  Runtime& rt = *(src.device ? src.device : dst.device)->rt;
  const size_t bytes = bytes_of(count, item);
  const size_t soff = bytes_of(src.offset, item);
  const size_t doff = bytes_of(dst.offset, item);
  if (src.device && dst.device)
    step("device copy", [&] { rt.copy_device(dst.device->id, doff, src.device->id, soff, bytes); });
  else if (dst.device)
    step("copy to device",
         [&] { rt.copy_to_device(dst.device->id, doff, static_cast<const char*>(src.host) + soff, bytes); });
  else
    step("copy to host", [&] { rt.copy_to_host(static_cast<char*>(dst.host) + doff, src.device->id, soff, bytes); });
  step("synchronization", [&] { rt.synchronize(); });
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    free();
    v_ = std::move(o.v_);
    o.v_ = BufferView{};
  }
  return *this;
}

Buffer Buffer::allocate(std::shared_ptr<Runtime> rt, int64_t n, int item, bool zero) {
  if (n < 0) throw std::invalid_argument("Metal size must be non-negative");
  if (item <= 0 || static_cast<uint64_t>(n) > SIZE_MAX / static_cast<size_t>(item)) throw std::bad_alloc();
  Buffer b;
  if (n > 0) step("allocation", [&] { b.v_.id = rt->allocate(bytes_of(n, item), zero); });
  b.v_.rt = std::move(rt);
  b.v_.size = n;
  b.v_.item = item;
  return b;
}

void Buffer::free() noexcept {
  if (v_.rt && v_.id) {
    try {
      v_.rt->synchronize();
    } catch (...) {
      // The pending work is abandoned: the buffer can go.
    }
    v_.rt->free(v_.id);
  }
  v_ = BufferView{};
}

}  // namespace sw::metal
