// The one coordinate walker of the engine: K operands iterate one coordinate
// space (the same extents leaf by leaf, each operand with its own strides),
// first mode fastest, carrying K scalar indices incrementally.
//
// Before walking, the modes are simplified without changing the sequence of
// index tuples visited: extent-1 modes are dropped and a mode is merged into
// its faster neighbour when every operand continues it contiguously
// (stride == previous extent * previous stride), so a compact layout becomes
// one long unit-stride run. With Repeats::Skip a mode whose stride is 0 for
// every operand is dropped too: it only revisits the same index tuple, which
// idempotent work (copies, fills, elementwise writes) need not do again.
// Summing callers keep the default Repeats::Visit.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace sw {

// One leaf of a layout: an extent and the stride of its index.
struct LeafMode {
  int64_t extent;
  int64_t stride;
  bool operator==(const LeafMode& o) const = default;
};

template <size_t K>
using Indices = std::array<int64_t, K>;

enum class Repeats { Visit, Skip };

// The simplified joint iteration space of K operands.
template <size_t K>
struct JointModes {
  std::vector<int64_t> extent;
  std::vector<Indices<K>> stride;
  bool empty = false;  // some extent is <= 0: there is no coordinate at all

  // Appends the next (slower) mode, dropping or merging it as described above.
  void append(int64_t e, const Indices<K>& s, Repeats repeats = Repeats::Visit) {
    if (e <= 0) empty = true;
    if (empty || e == 1) return;
    if (repeats == Repeats::Skip) {
      bool all_zero = true;
      for (size_t k = 0; k < K; ++k) all_zero = all_zero && s[k] == 0;
      if (all_zero) return;
    }
    if (!extent.empty()) {
      const int64_t pe = extent.back();
      const Indices<K>& ps = stride.back();
      bool merge = true;
      for (size_t k = 0; k < K && merge; ++k) merge = s[k] == ps[k] * pe;
      if (merge) {
        extent.back() *= e;
        return;
      }
    }
    extent.push_back(e);
    stride.push_back(s);
  }
};

// Joint modes of K leaf lists. Throws std::invalid_argument when the lists
// differ in length or in an extent.
template <size_t K>
JointModes<K> joint_modes(const std::array<const std::vector<LeafMode>*, K>& ls,
                          Repeats repeats = Repeats::Visit) {
  static_assert(K >= 1);
  const size_t n = ls[0]->size();
  for (size_t k = 1; k < K; ++k) {
    if (ls[k]->size() != n)
      throw std::invalid_argument("kernel operands have different numbers of leaf modes");
    for (size_t d = 0; d < n; ++d)
      if ((*ls[k])[d].extent != (*ls[0])[d].extent)
        throw std::invalid_argument("kernel operands have different extents at leaf " + std::to_string(d));
  }
  JointModes<K> m;
  for (size_t d = 0; d < n; ++d) {
    Indices<K> s;
    for (size_t k = 0; k < K; ++k) s[k] = (*ls[k])[d].stride;
    m.append((*ls[0])[d].extent, s, repeats);
  }
  return m;
}

// Calls run(base, n, step) for every run of the fastest mode: the K indices
// of the run's first coordinate, its length and the K per-step strides.
// Runs come in coordinate order. When run returns bool, false stops the walk
// (and walk_runs returns false); it returns true when every run was visited.
template <size_t K, class Run>
bool walk_runs(const JointModes<K>& m, Run&& run) {
  using R = std::invoke_result_t<Run&, const Indices<K>&, int64_t, const Indices<K>&>;
  auto call = [&](const Indices<K>& base, int64_t n, const Indices<K>& step) -> bool {
    if constexpr (std::is_same_v<R, bool>) return run(base, n, step);
    else { run(base, n, step); return true; }
  };
  if (m.empty) return true;
  Indices<K> base{};
  const size_t nm = m.extent.size();
  if (nm == 0) return call(base, 1, Indices<K>{});  // one coordinate
  const int64_t e0 = m.extent[0];
  const Indices<K> s0 = m.stride[0];
  std::vector<int64_t> coord(nm, 0);
  for (;;) {
    if (!call(base, e0, s0)) return false;
    size_t d = 1;
    for (; d < nm; ++d) {
      if (++coord[d] < m.extent[d]) {
        for (size_t k = 0; k < K; ++k) base[k] += m.stride[d][k];
        break;
      }
      for (size_t k = 0; k < K; ++k) base[k] -= m.stride[d][k] * (m.extent[d] - 1);
      coord[d] = 0;
    }
    if (d == nm) return true;
  }
}

// Calls f(idx) with the K indices of every coordinate, in coordinate order.
// When f returns bool, false stops the walk (walk then returns false).
template <size_t K, class F>
bool walk(const JointModes<K>& m, F&& f) {
  using R = std::invoke_result_t<F&, const Indices<K>&>;
  return walk_runs(m, [&](const Indices<K>& base, int64_t n, const Indices<K>& step) -> bool {
    Indices<K> idx = base;
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_same_v<R, bool>) {
        if (!f(idx)) return false;
      } else {
        f(idx);
      }
      for (size_t k = 0; k < K; ++k) idx[k] += step[k];
    }
    return true;
  });
}

// Calls f(ordinal, index) for every coordinate in colexicographic order (a
// thin wrapper over the walker above).
template <class F>
void for_each_index(const std::vector<LeafMode>& leaves, F&& f) {
  int64_t ordinal = 0;
  walk(joint_modes<1>({&leaves}), [&](const Indices<1>& i) { f(ordinal++, i[0]); });
}

}  // namespace sw
