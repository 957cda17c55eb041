// Coordinate keys (csrc/engine/layout/keys.hpp), read through a test reader
// over a small key tree.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layout/keys.hpp"
#include "builders.hpp"

using swtest::L;
using swtest::N;
using sw::IntTree;
using sw::KeyStatus;
using sw::Layout;
using sw::PartKind;

namespace {

// A key part: an int, a sequence of parts, or something the reader refuses.
struct Key {
  enum { Int, Seq, Bad } kind = Int;
  int64_t value = 0;
  std::vector<Key> items;
};
Key I(int64_t v) { return Key{Key::Int, v, {}}; }
Key S(std::vector<Key> items) { return Key{Key::Seq, 0, std::move(items)}; }
Key B() { return Key{Key::Bad, 0, {}}; }

struct Reader {
  struct Items {
    const std::vector<Key>* v = nullptr;
    size_t size() const { return v->size(); }
    const Key* operator[](size_t i) const { return &(*v)[i]; }
  };
  std::vector<std::string> log;  // what was read, in order
  bool fail_items = false;

  PartKind kind(const Key* k) {
    if (k->kind == Key::Bad) {
      log.push_back("bad");
      return PartKind::Bad;
    }
    return k->kind == Key::Int ? PartKind::Int : PartKind::Sequence;
  }
  KeyStatus ordinal(const Key* k, int64_t limit, int64_t* out) {
    log.push_back("int " + std::to_string(k->value) + "<" + std::to_string(limit));
    if (k->value < 0 || k->value >= limit) return KeyStatus::Outside;
    *out = k->value;
    return KeyStatus::Ok;
  }
  bool items(const Key* k, Items* out) {
    if (fail_items) return false;
    out->v = &k->items;
    return true;
  }
};

// (2, (3, 4)) : (1, (2, 6)) -- the second mode is column-major inside.
const Layout kLayout(N({L(2), N({L(3), L(4)})}), N({L(1), N({L(2), L(6)})}));

KeyStatus index(const Key& k, int64_t* out, Reader* r = nullptr) {
  Reader local;
  return sw::key_index(r ? *r : local, &k, kLayout, out);
}

}  // namespace

TEST(LayoutKeys, FlatOrdinal) {
  int64_t idx = -1;
  ASSERT_EQ(index(I(0), &idx), KeyStatus::Ok);
  EXPECT_EQ(idx, 0);
  ASSERT_EQ(index(I(3), &idx), KeyStatus::Ok);  // (1, (1, 0))
  EXPECT_EQ(idx, 1 + 2);
  ASSERT_EQ(index(I(23), &idx), KeyStatus::Ok);
  EXPECT_EQ(idx, kLayout.index_of_ordinal(23));
  EXPECT_EQ(index(I(24), &idx), KeyStatus::Outside);
  EXPECT_EQ(index(I(-1), &idx), KeyStatus::Outside);
}

TEST(LayoutKeys, NestedKeysMatchOrdinals) {
  int64_t a = -1, b = -1;
  // (1, 7): the second part is an ordinal within mode (3, 4): (1, 2).
  ASSERT_EQ(index(S({I(1), I(7)}), &a), KeyStatus::Ok);
  EXPECT_EQ(a, 1 * 1 + 1 * 2 + 2 * 6);
  ASSERT_EQ(index(S({I(1), S({I(1), I(2)})}), &b), KeyStatus::Ok);
  EXPECT_EQ(a, b);
  for (int64_t o = 0; o < 24; ++o) {
    int64_t flat, nested;
    ASSERT_EQ(index(I(o), &flat), KeyStatus::Ok);
    ASSERT_EQ(index(S({I(o % 2), S({I(o / 2 % 3), I(o / 6)})}), &nested), KeyStatus::Ok);
    EXPECT_EQ(flat, nested) << o;
  }
}

TEST(LayoutKeys, OutsideTheDomain) {
  int64_t idx = 42;
  EXPECT_EQ(index(S({I(1)}), &idx), KeyStatus::Outside);                 // too few parts
  EXPECT_EQ(index(S({I(0), I(0), I(0)}), &idx), KeyStatus::Outside);     // too many
  EXPECT_EQ(index(S({S({I(0)}), I(0)}), &idx), KeyStatus::Outside);      // a sequence for a leaf
  EXPECT_EQ(index(S({I(2), I(0)}), &idx), KeyStatus::Outside);           // beyond the leaf
  EXPECT_EQ(index(S({I(0), I(12)}), &idx), KeyStatus::Outside);          // beyond the node
  EXPECT_EQ(index(S({I(0), S({I(0), I(4)})}), &idx), KeyStatus::Outside);
  EXPECT_EQ(idx, 42);  // untouched on failure
}

TEST(LayoutKeys, StopsAtTheFirstFailure) {
  int64_t idx = 0;
  Reader r;
  // The first part is outside: the bad second part is never read.
  EXPECT_EQ(index(S({I(5), B()}), &idx, &r), KeyStatus::Outside);
  EXPECT_EQ(r.log, (std::vector<std::string>{"int 5<2"}));
  Reader r2;
  EXPECT_EQ(index(S({I(1), B()}), &idx, &r2), KeyStatus::Error);
  EXPECT_EQ(r2.log, (std::vector<std::string>{"int 1<2", "bad"}));
  Reader r3;
  EXPECT_EQ(index(B(), &idx, &r3), KeyStatus::Error);
  EXPECT_EQ(r3.log, (std::vector<std::string>{"bad"}));  // read once
  Reader r4;
  r4.fail_items = true;
  EXPECT_EQ(index(S({I(0), I(0)}), &idx, &r4), KeyStatus::Error);
}

TEST(LayoutKeys, RankZeroLayout) {
  const Layout scalar(N({}), N({}));
  Reader r;
  int64_t idx = -1;
  const Key empty = S({});
  const Key zero = I(0);
  EXPECT_EQ(sw::key_index(r, &zero, scalar, &idx), KeyStatus::Ok);
  EXPECT_EQ(idx, 0);
  idx = -1;
  EXPECT_EQ(sw::key_index(r, &empty, scalar, &idx), KeyStatus::Ok);
  EXPECT_EQ(idx, 0);
  EXPECT_EQ(sw::mode_size(L(7)), 7);
  EXPECT_EQ(sw::mode_size(N({L(3), L(4)})), 12);
}
