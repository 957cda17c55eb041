#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

#include "files/file_storage.hpp"
#include "files/io.hpp"

namespace {
std::string temp_path(const char* tag) {
  return testing::TempDir() + "sw_file_io_" + tag + "_" + std::to_string(::getpid());
}
}  // namespace

TEST(FileIo, WriteThenReadRoundTrips) {
  sw::FileStorage f;
  f.create(temp_path("rt"));
  std::vector<int32_t> src(1000);
  std::iota(src.begin(), src.end(), 0);
  sw::file_write_span(f, 0, src.data(), 1000, 4);
  EXPECT_EQ(f.bytes(), 4000);
  std::vector<int32_t> back(1000, -1);
  sw::file_read_span(f, 0, back.data(), 1000, 4);
  EXPECT_EQ(back, src);
}

TEST(FileIo, SpansHonourSlotOffsets) {
  sw::FileStorage f;
  f.create(temp_path("off"));
  f.resize(10 * 8);
  std::vector<double> src{1.5, 2.5, 3.5};
  sw::file_write_span(f, 4, src.data(), 3, 8);
  std::vector<double> back(5, 0.0);
  sw::file_read_span(f, 3, back.data(), 5, 8);
  EXPECT_EQ(back, (std::vector<double>{0.0, 1.5, 2.5, 3.5, 0.0}));
}

TEST(FileIo, LargerThanOneChunk) {
  sw::FileStorage f;
  f.create(temp_path("big"));
  const int64_t n = sw::kFileChunkBytes / 4 + 1000;  // crosses a chunk boundary
  std::vector<uint32_t> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = static_cast<uint32_t>(i * 2654435761u);
  sw::file_write_span(f, 0, src.data(), n, 4);
  std::vector<uint32_t> back(static_cast<size_t>(n), 0);
  sw::file_read_span(f, 0, back.data(), n, 4);
  EXPECT_EQ(back, src);
}

TEST(FileIo, FileToFileCopy) {
  sw::FileStorage a, b;
  a.create(temp_path("a"));
  b.create(temp_path("b"));
  std::vector<float> src{1, 2, 3, 4, 5, 6};
  sw::file_write_span(a, 0, src.data(), 6, 4);
  b.resize(4 * 4);
  sw::file_copy_span(a, 2, b, 0, 4, 4);
  std::vector<float> back(4, 0);
  sw::file_read_span(b, 0, back.data(), 4, 4);
  EXPECT_EQ(back, (std::vector<float>{3, 4, 5, 6}));
  sw::file_copy_span(a, 0, b, 0, 0, 4);  // empty span is fine
}

TEST(FileIo, ReadPastEndThrows) {
  sw::FileStorage f;
  f.create(temp_path("short"));
  f.resize(8);
  std::vector<int32_t> back(4);
  EXPECT_THROW(sw::file_read_span(f, 0, back.data(), 4, 4), std::system_error);
}

TEST(FileIo, ClosedStorageThrows) {
  sw::FileStorage f;
  int32_t v = 1;
  EXPECT_THROW(sw::file_write_span(f, 0, &v, 1, 4), std::system_error);
  EXPECT_THROW(sw::file_read_span(f, 0, &v, 1, 4), std::system_error);
  EXPECT_THROW(sw::file_read_span(f, -1, &v, 1, 4), std::system_error);
}
