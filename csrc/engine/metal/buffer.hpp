// Device storage of one Metal carrier and the step sequences around it:
// allocation (zero-filled on request), slot reads and writes, the bulk fill
// of new_like, the span copies of the registered Metal moves, and release.
//
// Ordering rules (spec: "Metal movement preserves the complete Tensor value
// boundary"): a slot write enqueues a host->device copy and returns; a slot
// read and every span copy synchronize before they return, so host bytes are
// never used early and a move never reports completion while the device
// works; a buffer is freed only after synchronizing, so it is never freed
// while work on it may be pending.
//
// A failed device step throws StepError naming the step ("allocation",
// "copy to device", "copy to host", "device copy", "synchronization"); the
// binding turns it into RuntimeError("Metal <step> failed: <what>"). The step
// functions take a BufferView by value-like snapshot so the binding can run
// them with the GIL released while the carrier object stays untouched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "metal/runtime.hpp"

namespace sw::metal {

class StepError : public std::runtime_error {
 public:
  StepError(const char* step, const std::string& what) : std::runtime_error(what), step_(step) {}
  const char* step() const { return step_; }

 private:
  const char* step_;
};

// What a device step needs of a carrier's storage. An empty view (no
// buffer) has size 0.
struct BufferView {
  std::shared_ptr<Runtime> rt;  // the runtime that owns id
  BufferId id = 0;
  int64_t size = 0;  // slots
  int item = 0;      // bytes per slot
};

// Slot i (in range) into out (item bytes): copy to host, then synchronize.
void read_slot(const BufferView& v, int64_t i, void* out);
// Enqueues the write of slot i (in range) from in; not waited for (the
// runtime stages the bytes before returning).
void write_slot(const BufferView& v, int64_t i, const void* in);
// Enqueues the write of n slots from in, starting at slot 0 (n <= size).
void write_slots(const BufferView& v, const void* in, int64_t n);

// One end of a span copy: device storage (device set) or host memory of
// size slots (host set), starting at slot offset.
struct SpanEnd {
  const BufferView* device = nullptr;
  void* host = nullptr;
  int64_t offset = 0;
  int64_t size = 0;  // slots of the carrier, as its size hook reports them
  static SpanEnd on_device(const BufferView& v, int64_t size, int64_t offset) {
    return SpanEnd{&v, nullptr, offset, size};
  }
  static SpanEnd on_host(void* data, int64_t size, int64_t offset) { return SpanEnd{nullptr, data, offset, size}; }
};

// Copies count slots of item bytes from src to dst (at least one end on the
// device), then synchronizes. Throws std::invalid_argument("_copy()
// element_count exceeds a carrier") for a span outside either end,
// std::runtime_error for device ends of different runtimes (checked only
// when there is something to copy), StepError for a failed step.
void copy_span(const SpanEnd& src, const SpanEnd& dst, int64_t count, int item);

// The storage a Metal carrier owns: freed (after synchronizing) by free()
// or the destructor. Holding the runtime keeps it alive as long as the
// buffer.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : v_(std::move(o.v_)) { o.v_ = BufferView{}; }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer() { free(); }

  // Fresh storage of n slots of item bytes on rt (no device buffer for
  // n == 0, but the runtime is kept). Throws std::invalid_argument("Metal
  // size must be non-negative"), std::bad_alloc when the byte count
  // overflows, StepError("allocation").
  static Buffer allocate(std::shared_ptr<Runtime> rt, int64_t n, int item, bool zero);

  const BufferView& view() const { return v_; }
  const std::shared_ptr<Runtime>& runtime() const { return v_.rt; }
  BufferId id() const { return v_.id; }
  int64_t size() const { return v_.size; }
  // Synchronizes (a failure abandons the pending work), frees the device
  // buffer and forgets the runtime. Idempotent.
  void free() noexcept;

 private:
  BufferView v_;
};

}  // namespace sw::metal
