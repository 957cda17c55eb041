#include "metal/runtime.hpp"

#include <mutex>

namespace sw::metal {

namespace {

std::mutex g_mu;
std::shared_ptr<Runtime> g_runtime;

}  // namespace

std::shared_ptr<Runtime> current_runtime() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime;
}

void install_runtime(std::shared_ptr<Runtime> r) {
  std::shared_ptr<Runtime> old;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    old = std::move(g_runtime);
    g_runtime = std::move(r);
  }
  // old (if last) is destroyed outside the lock.
}

}  // namespace sw::metal
