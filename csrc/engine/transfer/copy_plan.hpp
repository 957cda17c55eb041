// Copy planning for moves: from what each side of a copy is to the engine
// (host memory, a file, or nothing it can reach) to a plan that runs
// without Python.
//
// A span plan copies a whole physical span of slots (holes included); a
// logical plan copies the logical elements of a layout into the same
// coordinates of another layout of that shape. A pair the engine cannot
// copy natively gets the empty plan (kind None), and the caller copies value
// by value (for_each_index_pair walks the coordinates for that).
#pragma once
#include <cstdint>
#include <exception>
#include <vector>

#include "files/file_storage.hpp"
#include "layout/iter.hpp"
#include "layout/layout.hpp"

namespace sw {

// One side of a copy as the engine can reach it. itemsize is the bytes per
// slot of the carrier's storage dtype (0: not a native dtype); it is kept
// even for a None endpoint so a plan can compare both sides.
struct CopyEndpoint {
  enum class Kind { None, Host, File };
  Kind kind = Kind::None;
  char* host = nullptr;         // Host: address of slot 0
  FileStorage* file = nullptr;  // File: the open storage
  int itemsize = 0;

  static CopyEndpoint none(int itemsize = 0) { return CopyEndpoint{Kind::None, nullptr, nullptr, itemsize}; }
  static CopyEndpoint host_span(void* data, int itemsize) {
    return CopyEndpoint{Kind::Host, static_cast<char*>(data), nullptr, itemsize};
  }
  static CopyEndpoint file_span(FileStorage& f, int itemsize) {
    return CopyEndpoint{Kind::File, nullptr, &f, itemsize};
  }
};

enum class CopyPlanKind {
  None,         // no native plan: copy value by value
  HostToHost,   // span: memmove
  HostToFile,   // span: pwrite
  FileToHost,   // span: pread
  FileToFile,   // span: staged through a bounded buffer
  HostStrided,  // logical elements between host buffers (same or different layouts)
};

const char* to_string(CopyPlanKind k);

// A planned copy. Holds raw addresses and strides only: the caller keeps
// both endpoints alive (and unchanged in size) until run() returns.
class CopyPlan {
 public:
  CopyPlan() = default;  // kind None

  // count slots from src[src_offset...] to dst[dst_offset...]. None unless
  // both endpoints are native, of one non-zero item size.
  static CopyPlan span(const CopyEndpoint& src, int64_t src_offset, const CopyEndpoint& dst, int64_t dst_offset,
                       int64_t count);
  // Every element of src_layout (read at src_offset) into the same
  // coordinates of dst_layout (at dst_offset); the shapes match. Between two
  // host endpoints it is a strided copy (slots no coordinate reaches keep
  // their values; a stride-0 destination mode keeps the last write); with a
  // file it is native only when both layouts are the same, and then the
  // whole physical span (cosize slots, holes included) is copied.
  static CopyPlan logical(const CopyEndpoint& src, int64_t src_offset, const Layout& src_layout,
                          const CopyEndpoint& dst, int64_t dst_offset, const Layout& dst_layout);

  CopyPlanKind kind() const { return kind_; }
  bool native() const { return kind_ != CopyPlanKind::None; }
  // Slots of the span (span kinds); elements are extents' product otherwise.
  int64_t count() const { return count_; }
  // Bytes the plan copies (holes of a span included).
  int64_t bytes() const { return count_ * src_.itemsize; }
  // At most `pieces` plans that together copy exactly what this one does,
  // each of at least min_bytes, so several threads can run them at once:
  // a host span is cut into page-multiple runs, a strided host copy between
  // two identical layouts along its longest mode (identical layouts map
  // every source slot to one destination slot, so no two pieces write one
  // slot with different values). Any other plan, or one too small to cut,
  // comes back whole.
  std::vector<CopyPlan> split(int pieces, int64_t min_bytes) const;

  // Runs the copy; needs no Python. Throws std::system_error (file I/O),
  // std::bad_alloc, or std::logic_error for a None plan.
  void run() const;
  // run() for a worker thread or a GIL-released section: what it threw,
  // or a null pointer on success. Never throws.
  std::exception_ptr run_captured() const noexcept;

 private:
  friend std::vector<std::vector<size_t>> vectored_groups(const std::vector<const CopyPlan*>& plans);
  friend void run_independent(const std::vector<const CopyPlan*>& plans);

  CopyPlanKind kind_ = CopyPlanKind::None;
  CopyEndpoint src_, dst_;
  int64_t src_offset_ = 0, dst_offset_ = 0, count_ = 0;
  std::vector<int64_t> extents_, src_strides_, dst_strides_;  // HostStrided
  bool same_layout_ = false;                                   // HostStrided: split() may cut it
};

// Runs plans that are independent (none writes what another reads or
// writes), in any order. Spans between host memory and one file whose file
// ranges continue each other go to the file as one preadv / pwritev (a
// tile of many runs, or neighbouring tiles, in one call); every other plan
// runs alone. Throws what run() throws (the first failure; some plans may
// have run).
void run_independent(const std::vector<const CopyPlan*>& plans);
// The vectored calls run_independent makes: the indices into plans of each
// group of file-to-host (or host-to-file) spans of one file, in file order,
// whose file ranges continue each other. Plans in no group run alone.
std::vector<std::vector<size_t>> vectored_groups(const std::vector<const CopyPlan*>& plans);

// Walks the coordinates of two layouts of one shape together (first mode
// fastest), calling f(ordinal, src_index, dst_index) until it returns false.
// For idempotent copies: a mode whose stride is 0 on both sides only repeats
// the same pair and is walked once (a broadcast view costs its cosize, not
// its logical size); ordinal counts the pairs visited. Throws
// std::invalid_argument unless a and b have the same extents leaf by leaf.
// True when every pair was visited.
template <class F>
bool for_each_index_pair(const std::vector<LeafMode>& a, const std::vector<LeafMode>& b, F&& f) {
  const JointModes<2> modes = joint_modes<2>({&a, &b}, Repeats::Skip);
  int64_t ordinal = 0;
  return walk(modes, [&](const Indices<2>& i) -> bool { return f(ordinal++, i[0], i[1]); });
}

}  // namespace sw
