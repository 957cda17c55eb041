// The recycled managed-tensor blocks: many live at once, freed on other
// threads (whose lists die with them), legacy and versioned blocks mixed,
// and more dimensions than the recycled size holds: every tensor reads
// back its own shape and strides, every owner is released exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "dlpack/export.hpp"
#include "builders.hpp"

using sw::IntTree;
using sw::Layout;
namespace dl = sw::dlpack;
using swtest::Owner;
using swtest::release_counting;

namespace {

// A rank-`rank` layout whose extents and strides identify `tag`.
Layout tagged(int rank, int64_t tag) {
  std::vector<IntTree> shape, stride;
  for (int k = 0; k < rank; ++k) {
    shape.push_back(IntTree::leaf(1 + (tag + k) % 3));
    stride.push_back(IntTree::leaf(1000 * tag + k));
  }
  return Layout(IntTree::node(std::move(shape)), IntTree::node(std::move(stride)));
}

bool reads_back(const DLTensor& t, int rank, int64_t tag) {
  if (t.ndim != rank) return false;
  for (int k = 0; k < rank; ++k)
    if (t.shape[k] != 1 + (tag + k) % 3 || t.strides[k] != 1000 * tag + k) return false;
  return true;
}

}  // namespace

TEST(DLPackBlocks, LiveBlocksFreedOnOtherThreadsAndReused) {
  float storage[4];
  Owner owner;
  std::vector<Layout> layouts;
  for (int k = 0; k < 3000; ++k) layouts.push_back(tagged(1 + k % 12, k));  // ranks 1..12: some not recycled
  for (int round = 0; round < 3; ++round) {
    std::vector<DLManagedTensor*> legacy;
    std::vector<DLManagedTensorVersioned*> versioned;
    for (int k = 0; k < 3000; ++k) {
      dl::ExportSpec s;
      s.data = storage;
      s.leaves = layouts[k].leaves();
      if (k % 2) {
        versioned.push_back(dl::make_versioned(s, &owner, release_counting));
        ASSERT_NE(versioned.back(), nullptr);
      } else {
        legacy.push_back(dl::make_legacy(s, &owner, release_counting));
        ASSERT_NE(legacy.back(), nullptr);
      }
    }
    for (size_t i = 0; i < legacy.size(); ++i) ASSERT_TRUE(reads_back(legacy[i]->dl_tensor, 1 + (2 * i) % 12, 2 * i));
    for (size_t i = 0; i < versioned.size(); ++i)
      ASSERT_TRUE(reads_back(versioned[i]->dl_tensor, 1 + (2 * i + 1) % 12, 2 * i + 1));
    // Half are freed here, half on a thread that exits right after (its
    // list is freed with it); the next round allocates from this thread's.
    std::thread other([&] {
      for (size_t i = 1; i < legacy.size(); i += 2) legacy[i]->deleter(legacy[i]);
      for (size_t i = 1; i < versioned.size(); i += 2) versioned[i]->deleter(versioned[i]);
    });
    for (size_t i = 0; i < legacy.size(); i += 2) legacy[i]->deleter(legacy[i]);
    for (size_t i = 0; i < versioned.size(); i += 2) versioned[i]->deleter(versioned[i]);
    other.join();
  }
  EXPECT_EQ(owner.releases.load(), 3 * 3000);
}
