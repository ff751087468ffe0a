#pragma once
// A file of the run directory that rank 0 keeps for the whole run (metrics.jsonl, config.toml)
// and a user may delete or replace under it (`rm RUN/metrics.jsonl` mid-run): before each write it
// checks that the path still names the file it wrote (device and inode), and otherwise writes the
// file again whole, from what it holds, with a warning, instead of appending to a deleted inode.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace ddp::train {

class KeptFile {
 public:
  // Replaces `path` atomically with `content` and keeps it (appends go to it).
  KeptFile(std::filesystem::path path, std::string content);
  // Keeps the file `path` as it is now (its content read once); nothing when it does not exist.
  static KeptFile adopt(std::filesystem::path path);
  ~KeptFile();
  KeptFile(KeptFile&& other) noexcept;
  KeptFile& operator=(KeptFile&&) = delete;
  KeptFile(const KeptFile&) = delete;

  // Appends `text` (after restore_if_gone). SystemError naming the file when the write fails.
  void append(const std::string& text);
  // Writes the file again, whole, when its path no longer names the file this object wrote
  // (deleted, renamed, replaced); says so on stderr. Returns whether it did.
  bool restore_if_gone();

  const std::filesystem::path& path() const { return path_; }

 private:
  KeptFile() = default;
  void open_for_append();

  std::filesystem::path path_;
  std::string content_;
  int fd_ = -1;  // O_APPEND, or -1 for a file adopted and never appended to
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool kept_ = false;  // false: adopt() found nothing to keep
};

}  // namespace ddp::train
