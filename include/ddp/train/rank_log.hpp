#pragma once
// Each rank's warnings and errors in run.dir/logs/rank_NNNN.log as well as on stderr: while a
// RankLog lives, everything the process writes through stdio's stderr (every "ddp_train:
// warning/error" line, the error main reports before MPI_Abort) is copied to the file, each line
// with a timestamp. The copy is synchronous (no thread, no pipe): a line is in the file before the
// fprintf returns, so a rank that aborts right after its message still leaves it there.
// Written by libraries straight to file descriptor 2 (MPI's own messages) is not copied.
#include <cstdio>
#include <filesystem>
#include <string>

namespace ddp::train {

class RankLog {
 public:
  // Opens (appends to) dir/logs/rank_NNNN.log; where that fails a warning says so on stderr and
  // nothing is copied (a log must not stop the training).
  RankLog(const std::filesystem::path& run_dir, int rank);
  ~RankLog();  // stderr is the process's own again
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // A line in the file only (stamped), e.g. who started writing to it.
  void note(const std::string& line);
  bool active() const { return copy_ != nullptr; }

 private:
  std::filesystem::path path_;
  std::FILE* original_ = nullptr;
  std::FILE* copy_ = nullptr;
  int fd_ = -1;
  bool line_start_ = true;
  static ssize_t write(void* self, const char* data, size_t size);
  static int close(void* self);
};

}  // namespace ddp::train
