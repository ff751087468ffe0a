#pragma once
// File reading shared by the dataset readers (internal to src/data). Every failure is a DataError
// that names the file by its absolute path.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::data::detail {

// The path as shown in messages: absolute and normalised, in single quotes, so a user on a cluster
// (where every process may have another working directory) sees exactly which file is meant.
std::string quoted(const std::filesystem::path& p);

// What to do about a data root that does not exist, for the end of the message: set data.root, and
// when it is the placeholder of an installed example config ("/path/to/..."), say that it is one.
std::string missing_root_advice(const std::filesystem::path& root);

// Throws unless `dir` is an existing directory. `expected` describes what should be in it, e.g.
// "data_batch_1.bin ... data_batch_5.bin and test_batch.bin (the CIFAR-10 binary version)".
void require_directory(const std::filesystem::path& dir, std::string_view dataset,
                       std::string_view expected);

// Size of an existing regular file; throws (naming `expected`) when it is missing or not a file.
std::uint64_t regular_file_size(const std::filesystem::path& file, std::string_view expected);

// Reads exactly `size` bytes from the start of `file` into `out` (which must hold them), in large
// chunks. Throws when the file is shorter than `size` (e.g. it shrank since it was sized).
void read_exact(const std::filesystem::path& file, std::uint8_t* out, std::uint64_t size);

// Reads the first `size` bytes of `file` in pieces of at most `chunk` bytes (a multiple of the
// record size keeps records whole), handing each to `consume(data, bytes, offset)`. Bounds the
// memory a reader needs besides its output.
void read_chunked(
    const std::filesystem::path& file, std::uint64_t size, std::size_t chunk,
    const std::function<void(const std::uint8_t*, std::size_t, std::uint64_t)>& consume);

// What a chunked reader hands on: (data, bytes, offset of data in the content).
using Consume = std::function<void(const std::uint8_t*, std::size_t, std::uint64_t)>;

// Decompresses the gzip file `file` of `size` bytes piece by piece (1 MiB of input and of output
// at a time), handing each piece of output to `consume` with its offset in the decompressed
// content. Corrupt or truncated streams are DataErrors, as in read_maybe_gzip.
void gunzip_chunked(const std::filesystem::path& file, std::uint64_t size, const Consume& consume);

// Reads the records at `indices` (ascending) of a file of `record_bytes`-byte records that start at
// byte `first_byte`, consecutive records in one read, handing each to consume(record, index).
// A record past the end of the file is a DataError.
void read_records(const std::filesystem::path& file, std::uint64_t first_byte,
                  std::size_t record_bytes, std::span<const std::int64_t> indices,
                  const std::function<void(const std::uint8_t*, std::int64_t)>& consume);

// The whole content of `file`, decompressed when it starts with the gzip magic bytes 0x1f 0x8b (the
// name does not matter). Corrupt or truncated gzip streams are DataErrors. `*was_gzip` (if given)
// tells whether it was compressed, for messages about the decompressed size.
std::vector<std::uint8_t> read_maybe_gzip(const std::filesystem::path& file,
                                          std::string_view expected, bool* was_gzip = nullptr);

// Which of `raw` and `raw`.gz to read: the one that exists (nullopt when neither does); when both
// do, `raw` if their (decompressed) contents are equal, otherwise a DataError naming both files:
// silently preferring one of two different copies could train on stale data.
std::optional<std::filesystem::path> raw_or_gzip(const std::filesystem::path& raw,
                                                 std::string_view expected);

// True when the first bytes are the gzip magic.
bool is_gzip(const std::uint8_t* data, std::size_t size);

}  // namespace ddp::data::detail
