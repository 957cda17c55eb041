#include "metal/fake_runtime.hpp"

#include <chrono>
#include <cstring>
#include <string>

namespace sw::metal {

const char* FakeRuntime::call_name(Call c) {
  switch (c) {
    case Call::Allocate: return "allocate";
    case Call::Free: return "free";
    case Call::CopyToDevice: return "copy_to_device";
    case Call::CopyToHost: return "copy_to_host";
    case Call::CopyDevice: return "copy_device";
    case Call::Synchronize: return "synchronize";
  }
  return "?";
}

// Called with mu_ held. Logs the call and throws when a failure is injected.
void FakeRuntime::enter(Call kind, BufferId dst, BufferId src, size_t bytes) {
  int& countdown = fail_countdown_[static_cast<int>(kind)];
  if (countdown > 0 && --countdown == 0) {
    log_.push_back({kind, dst, src, bytes, false});
    throw DeviceError(std::string("injected ") + call_name(kind) + " failure");
  }
  log_.push_back({kind, dst, src, bytes, true});
}

// Called with mu_ held: the storage of a live buffer covering the range.
std::vector<unsigned char>& FakeRuntime::buffer(BufferId id, size_t offset, size_t bytes) {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) throw DeviceError("unknown Metal buffer");
  if (offset > it->second.size() || bytes > it->second.size() - offset)
    throw DeviceError("copy range exceeds the Metal buffer");
  return it->second;
}

BufferId FakeRuntime::allocate(size_t bytes, bool zero) {
  std::lock_guard<std::mutex> lock(mu_);
  const BufferId id = next_id_;
  enter(Call::Allocate, id, 0, bytes);
  ++next_id_;
  // A buffer that need not be zeroed gets a visible pattern, so tests notice
  // bytes read before they were written.
  buffers_.emplace(id, std::vector<unsigned char>(bytes, zero ? 0 : 0xA5));
  return id;
}

void FakeRuntime::free(BufferId id) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back({Call::Free, id, 0, 0, true});
  for (const auto& c : queue_) {
    if (c.dst == id || c.src == id) {
      ++unsafe_frees_;
      break;
    }
  }
  buffers_.erase(id);
}

void FakeRuntime::copy_to_device(BufferId dst, size_t dst_offset, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  enter(Call::CopyToDevice, dst, 0, bytes);
  buffer(dst, dst_offset, bytes);
  // Staged now: the caller may reuse src as soon as this returns.
  auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                             static_cast<const unsigned char*>(src) + bytes);
  queue_.push_back({dst, 0, [this, dst, dst_offset, staged] {
                      auto it = buffers_.find(dst);
                      if (it != buffers_.end() && !staged->empty())
                        std::memcpy(it->second.data() + dst_offset, staged->data(), staged->size());
                    }});
}

void FakeRuntime::copy_to_host(void* dst, BufferId src, size_t src_offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  enter(Call::CopyToHost, 0, src, bytes);
  buffer(src, src_offset, bytes);
  queue_.push_back({0, src, [this, dst, src, src_offset, bytes] {
                      auto it = buffers_.find(src);
                      if (it != buffers_.end() && bytes) std::memcpy(dst, it->second.data() + src_offset, bytes);
                    }});
}

void FakeRuntime::copy_device(BufferId dst, size_t dst_offset, BufferId src, size_t src_offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  enter(Call::CopyDevice, dst, src, bytes);
  buffer(dst, dst_offset, bytes);
  buffer(src, src_offset, bytes);
  queue_.push_back({dst, src, [this, dst, dst_offset, src, src_offset, bytes] {
                      auto d = buffers_.find(dst);
                      auto s = buffers_.find(src);
                      if (d != buffers_.end() && s != buffers_.end() && bytes)
                        std::memmove(d->second.data() + dst_offset, s->second.data() + src_offset, bytes);
                    }});
}

void FakeRuntime::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  int& countdown = fail_countdown_[static_cast<int>(Call::Synchronize)];
  if (countdown > 0 && --countdown == 0) {
    // A failed command buffer: its work is abandoned.
    log_.push_back({Call::Synchronize, 0, 0, queue_.size(), false});
    queue_.clear();
    throw DeviceError("injected synchronize failure");
  }
  if (held_) {
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !held_; });
    --waiting_;
  }
  const size_t n = queue_.size();
  while (!queue_.empty()) {
    Command c = std::move(queue_.front());
    queue_.pop_front();
    c.run();
  }
  // Logged on completion, so the log orders it after everything it waited for.
  log_.push_back({Call::Synchronize, 0, 0, n, true});
}

void FakeRuntime::fail_next(Call kind, int skip) {
  if (kind == Call::Free) return;
  std::lock_guard<std::mutex> lock(mu_);
  fail_countdown_[static_cast<int>(kind)] = skip + 1;
}

void FakeRuntime::hold_synchronize(bool held) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = held;
  cv_.notify_all();
}

bool FakeRuntime::wait_synchronizing(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return waiting_ > 0; });
}

std::vector<FakeRuntime::Entry> FakeRuntime::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

void FakeRuntime::clear_log() {
  std::lock_guard<std::mutex> lock(mu_);
  log_.clear();
}

size_t FakeRuntime::live_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffers_.size();
}

size_t FakeRuntime::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t FakeRuntime::unsafe_frees() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unsafe_frees_;
}

bool FakeRuntime::peek(BufferId id, size_t offset, void* out, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(id);
  if (it == buffers_.end() || offset > it->second.size() || bytes > it->second.size() - offset) return false;
  if (bytes) std::memcpy(out, it->second.data() + offset, bytes);
  return true;
}

}  // namespace sw::metal
