// FakeRuntime: a host-memory stand-in for the Metal runtime, for tests only.
// It defers every copy until synchronize() the way a command queue does,
// logs each call, and can fail or hold any step. Built into the engine tests
// and the strideweave._testing extension; never into _core.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "metal/runtime.hpp"

namespace sw::metal {

class FakeRuntime : public Runtime {
 public:
  enum class Call { Allocate, Free, CopyToDevice, CopyToHost, CopyDevice, Synchronize };
  static constexpr int kCallKinds = 6;
  struct Entry {
    Call call;
    BufferId dst;   // allocate/free/copies: the buffer written or freed (0 for host)
    BufferId src;   // copies: the buffer read (0 for host)
    size_t bytes;   // copies and allocate: bytes; synchronize: commands it completed
    bool ok;        // false when the step failed
  };

  BufferId allocate(size_t bytes, bool zero) override;
  void free(BufferId buffer) noexcept override;
  void copy_to_device(BufferId dst, size_t dst_offset, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, BufferId src, size_t src_offset, size_t bytes) override;
  void copy_device(BufferId dst, size_t dst_offset, BufferId src, size_t src_offset, size_t bytes) override;
  void synchronize() override;

  // The (skip + 1)-th next call of kind fails with DeviceError (Free cannot).
  void fail_next(Call kind, int skip = 0);
  // While held, synchronize() blocks before completing anything.
  void hold_synchronize(bool held);
  // Blocks until a synchronize() is waiting on the hold (true) or the
  // timeout passes (false).
  bool wait_synchronizing(int timeout_ms);

  std::vector<Entry> log() const;
  void clear_log();
  size_t live_buffers() const;
  size_t pending() const;  // enqueued commands not yet completed
  // Frees of a buffer that a pending command still used: each is a missed
  // synchronization before release.
  size_t unsafe_frees() const;
  // Copies a buffer's current (completed) bytes out; false for an unknown
  // buffer or range.
  bool peek(BufferId buffer, size_t offset, void* out, size_t bytes) const;

  static const char* call_name(Call c);

 private:
  struct Command {
    BufferId dst, src;  // buffers used (0 for host)
    std::function<void()> run;
  };
  void enter(Call kind, BufferId dst, BufferId src, size_t bytes);  // logs; throws when injected
  std::vector<unsigned char>& buffer(BufferId id, size_t offset, size_t bytes);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<BufferId, std::vector<unsigned char>> buffers_;
  std::deque<Command> queue_;
  std::vector<Entry> log_;
  int fail_countdown_[kCallKinds] = {};
  BufferId next_id_ = 1;
  size_t unsafe_frees_ = 0;
  bool held_ = false;
  int waiting_ = 0;
};

}  // namespace sw::metal
