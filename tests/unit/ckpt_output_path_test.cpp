// write_file_atomically, which every output path of the subcommands goes through: it replaces only
// regular files (and new names), writes into FIFOs and devices, refuses directories, and keeps a
// replaced file's permissions and a symbolic link.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data_test_util.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;
using data::test_util::read_text;
using data::test_util::TempDir;

TEST(WriteFileAtomically, ReplacesARegularFileKeepingItsMode) {
  TempDir dir;
  const auto f = dir / "out.csv";
  std::ofstream(f) << "old";
  ASSERT_EQ(::chmod(f.c_str(), 0640), 0);
  write_file_atomically(f, "new");
  EXPECT_EQ(read_text(f), "new");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST(WriteFileAtomically, KeepsASymbolicLinkAndWritesItsTarget) {
  TempDir dir;
  std::ofstream(dir / "target") << "old";
  fs::create_symlink("target", dir / "link");
  write_file_atomically(dir / "link", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(read_text(dir / "target"), "new");
}

TEST(WriteFileAtomically, RefusesADirectoryNamingIt) {
  TempDir dir;
  fs::create_directories(dir / "d" / "keep");
  try {
    write_file_atomically(dir / "d", "x");
    FAIL() << "a directory was accepted";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(dir / "d" / "keep"));
}

TEST(WriteFileAtomically, WritesIntoAFifoWithoutReplacingIt) {
  TempDir dir;
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_text(fifo); });
  write_file_atomically(fifo, "bytes through the pipe");
  reader.join();
  EXPECT_EQ(got, "bytes through the pipe");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(WriteFileAtomically, WritesIntoACharacterDeviceWithoutReplacingIt) {
  TempDir dir;
  const auto dev = dir / "null";
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod needs privileges this process does not have";
  write_file_atomically(dev, "into the null device");
  struct stat st {};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(WriteFileAtomically, DevStdoutGoesThroughTheProcesssOwnOutputInOrder) {
  TempDir dir;
  const auto file = dir / "stdout.txt";
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
  std::printf("before,");  // still in stdio's buffer when the bytes are written
  write_file_atomically("/dev/stdout", "bytes,");
  std::printf("after");
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  EXPECT_EQ(read_text(file), "before,bytes,after");
  EXPECT_TRUE(fs::is_regular_file(file));
}

TEST(WriteFileAtomically, CreatesANewFile) {
  TempDir dir;
  write_file_atomically(dir / "new.txt", "hello");
  EXPECT_EQ(read_text(dir / "new.txt"), "hello");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace ddp::ckpt
