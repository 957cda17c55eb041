// Builders shared by the engine tests: int trees, flat layouts, ramps and
// host endpoints (one definition instead of a copy per test file).
#pragma once
#include <atomic>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layout/layout.hpp"
#include "transfer/copy_plan.hpp"

namespace swtest {

// Built with AddressSanitizer (the storage layer then reuses no buffers).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The message of the std::invalid_argument f throws ("<no exception>" when
// it throws none).
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no exception>";
}

inline sw::IntTree L(int64_t v) { return sw::IntTree::leaf(v); }
inline sw::IntTree N(std::vector<sw::IntTree> c) { return sw::IntTree::node(std::move(c)); }

// A node of leaves: node({2, 3}) is (2, 3).
inline sw::IntTree node(const std::vector<int64_t>& v) {
  std::vector<sw::IntTree> c;
  for (int64_t x : v) c.push_back(L(x));
  return N(std::move(c));
}

// A one-level layout: layout({2, 3}, {1, 2}) is (2, 3):(1, 2).
inline sw::Layout layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  return sw::Layout(node(shape), node(stride));
}

// first, first + 1, ... (n values).
inline std::vector<float> iota(size_t n, float first = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// An export owner that counts its releases (the DLPack tests' deleter
// argument): release_counting(&owner) adds one.
struct Owner {
  std::atomic<int> releases{0};
};
inline void release_counting(void* o) noexcept { static_cast<Owner*>(o)->releases.fetch_add(1); }

// v's data as a host span of Float32 slots.
inline sw::CopyEndpoint host(std::vector<float>& v) { return sw::CopyEndpoint::host_span(v.data(), 4); }

// Whether n bytes at p are all zero.
inline bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

// Index of full coordinate x under l (one flat ordinal per top-level mode).
inline int64_t index_at(const sw::Layout& l, const std::vector<int64_t>& x) {
  int64_t idx = 0;
  for (size_t i = 0; i < x.size(); ++i)
    idx += sw::Layout(N({l.shape().children[i]}), N({l.stride().children[i]})).index_of_ordinal(x[i]);
  return idx;
}

// Every full coordinate of extents, first mode fastest.
inline std::vector<std::vector<int64_t>> coordinates(const std::vector<int64_t>& extents) {
  std::vector<std::vector<int64_t>> out;
  int64_t n = 1;
  for (int64_t e : extents) n *= e;
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> x;
    int64_t r = o;
    for (int64_t e : extents) {
      x.push_back(r % e);
      r /= e;
    }
    out.push_back(x);
  }
  return out;
}

}  // namespace swtest
