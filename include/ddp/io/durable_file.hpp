#pragma once
// POSIX pieces of an atomic write (temporary file in the same directory, fsync, rename), shared by
// snapshots (ckpt) and packed datasets (data): writing a file durably, fsync of a file or
// directory, the temporary name, errno text.
#include <cstddef>
#include <filesystem>
#include <string>

namespace ddp::io {

// Creates (or truncates) p, writes the bytes, fsyncs and closes it. Returns "" on success, else
// what failed and why ("writing <name>: No space left on device").
std::string write_durably(const std::filesystem::path& p, const void* data, std::size_t size);

// Flushes p (a file or a directory) to stable storage. Returns 0 or the errno of the failure.
int fsync_path(const std::filesystem::path& p);

// "<dir>/.<name>.tmp.<pid>": hidden, in the same directory (rename is atomic only within one file
// system) and unique per writer process.
std::filesystem::path temp_path_for(const std::filesystem::path& file);

std::string errno_text(int err);

}  // namespace ddp::io
