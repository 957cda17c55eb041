// A user's files in FileStorage: an existing file opened as a region (slot 0
// at a byte offset, every read/write/span path shifted by it), read-only
// opening, persistent creation, and the region rules FileBacked.open
// checks (plan_file_region).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "files/file_storage.hpp"
#include "files/io.hpp"
#include "files/store.hpp"
#include "files/temp_directory.hpp"
#include "transfer/copy_plan.hpp"
#include "files_support.hpp"

namespace {

using swtest::exists;

int errno_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::system_error& e) {
    return e.code().value();
  }
  return 0;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

class FileRegionTest : public swtest::ScratchDirTest {
 protected:
  // A file of a 16-byte header ("HEADER..." bytes) and int32 values 0..n-1.
  std::string header_file(int n) {
    const std::string p = dir_ + "/data.bin";
    std::ofstream out(p, std::ios::binary);
    out.write("HEADER-HEADER-16", 16);
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    return p;
  }
  std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
};

TEST_F(FileRegionTest, ARegionShiftsEveryReadAndWriteByItsOffset) {
  const std::string p = header_file(8);
  sw::FileStorage f;
  EXPECT_EQ(f.open_existing(p, true), 16 + 32);
  f.set_region(16, 24);  // slots 0..5
  EXPECT_TRUE(f.persistent() && f.writable() && !f.resizable());
  EXPECT_EQ(f.base(), 16);
  EXPECT_EQ(f.bytes(), 24);
  int32_t v = -1;
  f.read(2 * 4, &v, 4);
  EXPECT_EQ(v, 2);
  // The span copies (moves, tolist, tiled gathers) go through the same offset.
  std::vector<int32_t> back(3, -1);
  sw::file_read_span(f, 1, back.data(), 3, 4);
  EXPECT_EQ(back, (std::vector<int32_t>{1, 2, 3}));
  const std::vector<int32_t> src{70, 71};
  sw::file_write_span(f, 4, src.data(), 2, 4);
  const auto plan = sw::CopyPlan::span(sw::CopyEndpoint::host_span(const_cast<int32_t*>(src.data()), 4), 0,
                                       sw::CopyEndpoint::file_span(f, 4), 0, 1);
  plan.run();
  f.close_and_unlink();
  EXPECT_TRUE(exists(p)) << "a user's file is never removed";
  const std::string bytes = read_all(p);
  ASSERT_EQ(bytes.size(), 48u);
  EXPECT_EQ(bytes.substr(0, 16), "HEADER-HEADER-16");  // the header is untouched
  std::vector<int32_t> after(8);
  std::memcpy(after.data(), bytes.data() + 16, 32);
  EXPECT_EQ(after, (std::vector<int32_t>{70, 1, 2, 3, 70, 71, 6, 7}));
}

TEST_F(FileRegionTest, AReadOnlyRegionRefusesWritesAndResizes) {
  const std::string p = header_file(4);
  sw::FileStorage f;
  f.open_existing(p, false);
  f.set_region(16, 16);
  EXPECT_FALSE(f.writable());
  const int32_t v = 5;
  EXPECT_EQ(errno_of([&] { f.write(0, &v, 4); }), EBADF);
  EXPECT_EQ(errno_of([&] { f.resize(4); }), EINVAL);
  int32_t r = -1;
  f.read(12, &r, 4);
  EXPECT_EQ(r, 3);
}

TEST_F(FileRegionTest, VectoredReadsAndWritesGoThroughTheRegionToo) {
  const std::string p = header_file(8);
  sw::FileStorage f;
  f.open_existing(p, true);
  f.set_region(16, 32);
  int32_t a = -1, b[2] = {-1, -1};
  ::iovec in[2] = {{&a, 4}, {b, 8}};
  f.read_pieces(4, in, 2);  // slots 1, 2, 3
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b[1], 3);
  int32_t w[2] = {90, 91};
  ::iovec out[2] = {{&w[0], 4}, {&w[1], 4}};
  f.write_pieces(24, out, 2);  // slots 6, 7
  f.close_and_unlink();
  const std::string bytes = read_all(p);
  EXPECT_EQ(bytes.substr(0, 16), "HEADER-HEADER-16");
  std::vector<int32_t> after(8);
  std::memcpy(after.data(), bytes.data() + 16, 32);
  EXPECT_EQ(after, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 90, 91}));
  sw::FileStorage ro;
  ro.open_existing(p, false);
  ro.set_region(16, 32);
  EXPECT_EQ(errno_of([&] { ro.write_pieces(0, out, 2); }), EBADF);
}

TEST_F(FileRegionTest, OpenErrorsCarryTheirErrno) {
  sw::FileStorage f;
  EXPECT_EQ(errno_of([&] { f.open_existing(dir_ + "/missing", false); }), ENOENT);
  EXPECT_EQ(errno_of([&] { f.open_existing(dir_, false); }), EISDIR);
  EXPECT_EQ(errno_of([&] { f.open_existing(dir_, true); }), EISDIR);
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errno_of([&] { f.open_existing(fifo, false); }), EINVAL);  // refused, never waited on
  EXPECT_FALSE(f.is_open());
}

TEST_F(FileRegionTest, APersistentFileIsCreatedZeroedAndNeverRemoved) {
  const std::string p = dir_ + "/made.bin";
  {
    sw::FileStorage f;
    f.create_persistent(p, 40);
    EXPECT_TRUE(f.persistent() && f.writable() && f.resizable());
    EXPECT_EQ(f.bytes(), 40);
    int32_t v = 9;
    f.write(36, &v, 4);
    f.resize(48);  // may grow like a temporary file
  }  // destructor: closes, keeps
  ASSERT_TRUE(exists(p));
  const std::string bytes = read_all(p);
  ASSERT_EQ(bytes.size(), 48u);
  EXPECT_EQ(bytes.substr(0, 36), std::string(36, '\0'));
  sw::FileStorage again;
  EXPECT_EQ(errno_of([&] { again.create_persistent(p, 4); }), EEXIST);
  EXPECT_EQ(errno_of([&] { again.create_persistent(dir_ + "/no/such/dir.bin", 4); }), ENOENT);
  EXPECT_EQ(read_all(p).size(), 48u);  // the failed creation left it alone
}

TEST(FileRegionRules, ArgumentsAreCheckedBeforeTheFile) {
  EXPECT_NO_THROW(sw::check_region_arguments(0, std::nullopt, 4));
  EXPECT_NO_THROW(sw::check_region_arguments(128, 0, 8));
  EXPECT_NE(message_of([] { sw::check_region_arguments(-4, std::nullopt, 4); }).find("non-negative"),
            std::string::npos);
  EXPECT_NE(message_of([] { sw::check_region_arguments(0, -1, 4); }).find("slots must be non-negative"),
            std::string::npos);
  const std::string misaligned = message_of([] { sw::check_region_arguments(6, std::nullopt, 4); });
  EXPECT_NE(misaligned.find("misaligned"), std::string::npos) << misaligned;
  EXPECT_NE(misaligned.find("4 bytes"), std::string::npos) << misaligned;
  EXPECT_NE(message_of([] { sw::check_region_arguments(4, std::nullopt, 8); }).find("misaligned"),
            std::string::npos);
}

TEST(FileRegionRules, RegionsInsideTheFile) {
  const auto r = sw::plan_file_region("f", 48, 16, std::nullopt, 4);
  EXPECT_EQ(r.base, 16);
  EXPECT_EQ(r.slots, 8);
  EXPECT_EQ(sw::plan_file_region("f", 48, 16, 3, 4).slots, 3);
  EXPECT_EQ(sw::plan_file_region("f", 48, 48, std::nullopt, 4).slots, 0);  // an empty rest
  EXPECT_EQ(sw::plan_file_region("f", 48, 16, 8, 4).slots, 8);             // exactly to the end
  const std::string past = message_of([] { sw::plan_file_region("f", 48, 52, std::nullopt, 4); });
  EXPECT_NE(past.find("past the end of 'f' (48 bytes)"), std::string::npos) << past;
  const std::string short_file = message_of([] { sw::plan_file_region("f", 48, 16, 9, 4); });
  EXPECT_NE(short_file.find("too short"), std::string::npos) << short_file;
  const std::string ragged = message_of([] { sw::plan_file_region("f", 50, 16, std::nullopt, 4); });
  EXPECT_NE(ragged.find("not a whole number of 4-byte slots; pass slots="), std::string::npos) << ragged;
  // Overflowing slot counts are "too short", never a wrapped size.
  EXPECT_NE(message_of([] { sw::plan_file_region("f", 48, 0, INT64_MAX, 8); }).find("too short"),
            std::string::npos);
}

}  // namespace
