// The device interface behind the Metal carrier.
//
// The Metal carrier's step sequences (metal/buffer.hpp, run by
// csrc/python/metal.cpp) perform every device step through the process-wide
// Runtime: allocation, release, the three copy directions and
// synchronization. No real runtime is built on Linux (the
// carrier then refuses construction); tests install the host-memory fake of
// metal/fake_runtime.hpp, which is built only into the test targets (the
// engine tests and the strideweave._testing extension), never into _core.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>

namespace sw::metal {

// A failed device step (allocation, copy or synchronization).
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using BufferId = uint64_t;  // 0 means "no buffer"

// Commands run in submission order. Copies are enqueued and may complete
// later; synchronize() returns once every command enqueued before it has
// completed (host destinations then hold their bytes) or throws DeviceError,
// after which the queued commands are abandoned. Offsets and sizes are bytes.
// Every member is thread-safe.
class Runtime {
 public:
  virtual ~Runtime() = default;
  // A fresh buffer of bytes (zero-filled when zero). Throws DeviceError.
  virtual BufferId allocate(size_t bytes, bool zero) = 0;
  // Frees a buffer. The caller synchronizes first when work may be pending.
  virtual void free(BufferId buffer) noexcept = 0;
  // Host -> device. src is read before the call returns (the runtime may
  // stage it), so the caller may reuse it at once.
  virtual void copy_to_device(BufferId dst, size_t dst_offset, const void* src, size_t bytes) = 0;
  // Device -> host. dst must stay valid until synchronize() returns.
  virtual void copy_to_host(void* dst, BufferId src, size_t src_offset, size_t bytes) = 0;
  // Device -> device.
  virtual void copy_device(BufferId dst, size_t dst_offset, BufferId src, size_t src_offset, size_t bytes) = 0;
  virtual void synchronize() = 0;
};

// The installed runtime, or null (every build without a Metal runtime).
std::shared_ptr<Runtime> current_runtime();
// Installs r as the process runtime (null removes it). Carriers keep the
// runtime that allocated their buffer alive.
void install_runtime(std::shared_ptr<Runtime> r);

}  // namespace sw::metal
