#include "file_io.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <system_error>

#include "ddp/error.hpp"

namespace ddp::data::detail {

namespace fs = std::filesystem;

namespace {

// A path that names a symbolic-link loop is not "missing": say what it is.
void refuse_link_loop(const fs::path& p, const std::error_code& ec, std::string_view expected) {
  if (ec.value() == ELOOP)
    throw DataError(quoted(p) + ": a symbolic link loop (too many levels of symbolic links); " +
                    "expected " + std::string(expected));
}

}  // namespace

std::string quoted(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  // Appended piecewise: `"'" + str + "'"` trips a GCC 12 -Wrestrict false positive.
  std::string out(1, '\'');
  out += abs.lexically_normal().string();
  out += '\'';
  return out;
}

std::string missing_root_advice(const fs::path& root) {
  const std::string how =
      "--data.root DIR on the command line, or `root` under [data] in the config file";
  // modules/install.cmake writes this placeholder into the installed configs in place of the
  // repository's development copy.
  if (root.string().starts_with("/path/to/")) {
    return "; " + quoted(root) +
           " is the placeholder of an installed example config: set data.root to your copy of "
           "the dataset with " +
           how;
  }
  return "; set data.root to the directory holding it with " + how;
}

void require_directory(const fs::path& dir, std::string_view dataset, std::string_view expected) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  refuse_link_loop(dir, ec, expected);
  if (!fs::exists(st)) {
    throw DataError(std::string(dataset) + " directory " + quoted(dir) +
                    " does not exist; expected " + std::string(expected) + " there" +
                    missing_root_advice(dir));
  }
  if (!fs::is_directory(st)) {
    throw DataError(std::string(dataset) + " root " + quoted(dir) +
                    " is not a directory; it should be the directory holding " +
                    std::string(expected));
  }
}

std::uint64_t regular_file_size(const fs::path& file, std::string_view expected) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  refuse_link_loop(file, ec, expected);
  if (!fs::exists(st)) {
    throw DataError(quoted(file) + ": no such file; expected " + std::string(expected));
  }
  if (!fs::is_regular_file(st)) {
    throw DataError(quoted(file) + ": not a regular file; expected " + std::string(expected));
  }
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw DataError(quoted(file) + ": cannot determine its size: " + ec.message());
  return size;
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_for_reading(const fs::path& file) {
  File f(std::fopen(file.c_str(), "rb"));
  if (!f) {
    const int err = errno;
    throw DataError(quoted(file) +
                    ": cannot open for reading: " + std::generic_category().message(err));
  }
  // We read in large chunks straight into the destination; stdio's buffer would only add a copy.
  std::setvbuf(f.get(), nullptr, _IONBF, 0);
  return f;
}

// Reads exactly `want` bytes at the current position of `f`, which is `done` bytes into the file.
void fread_exact(std::FILE* f, const fs::path& file, std::uint8_t* out, std::size_t want,
                 std::uint64_t done, std::uint64_t size) {
  const std::size_t got = std::fread(out, 1, want, f);
  if (got == want) return;
  if (std::ferror(f)) {
    const int err = errno;
    throw DataError(quoted(file) + ": read error after " + std::to_string(done + got) +
                    " bytes: " + std::generic_category().message(err));
  }
  throw DataError(quoted(file) + ": file ended after " + std::to_string(done + got) +
                  " bytes but its size was " + std::to_string(size) +
                  " bytes (was it modified while being read?)");
}

}  // namespace

void read_exact(const fs::path& file, std::uint8_t* out, std::uint64_t size) {
  File f = open_for_reading(file);
  constexpr std::uint64_t kChunk = std::uint64_t{64} << 20;
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t want = static_cast<std::size_t>(std::min(kChunk, size - done));
    fread_exact(f.get(), file, out + done, want, done, size);
    done += want;
  }
}

void read_chunked(
    const fs::path& file, std::uint64_t size, std::size_t chunk,
    const std::function<void(const std::uint8_t*, std::size_t, std::uint64_t)>& consume) {
  File f = open_for_reading(file);
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size)));
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done));
    fread_exact(f.get(), file, buf.data(), want, done, size);
    consume(buf.data(), want, done);
    done += want;
  }
}

bool is_gzip(const std::uint8_t* data, std::size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

namespace {

struct Inflater {
  z_stream zs{};
  bool live = false;
  ~Inflater() {
    if (live) inflateEnd(&zs);
  }
};

}  // namespace

void gunzip_chunked(const fs::path& file, std::uint64_t size, const Consume& consume) {
  File f = open_for_reading(file);
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::vector<std::uint8_t> in(kPiece), out(kPiece);
  std::size_t begin = 0, end = 0;  // the input read but not yet inflated: in[begin, end)
  std::uint64_t read = 0, produced = 0;
  // Moves what is left to the front and reads what fits after it.
  const auto refill = [&] {
    std::copy(in.begin() + static_cast<std::ptrdiff_t>(begin),
              in.begin() + static_cast<std::ptrdiff_t>(end), in.begin());
    end -= begin;
    begin = 0;
    const auto want =
        static_cast<std::size_t>(std::min<std::uint64_t>(in.size() - end, size - read));
    fread_exact(f.get(), file, in.data() + end, want, read, size);
    end += want;
    read += want;
  };

  Inflater inf;
  if (inflateInit2(&inf.zs, 15 + 16) != Z_OK) {  // 15 + 16: zlib window, gzip wrapper only
    throw DataError(quoted(file) + ": cannot initialise zlib to decompress it");
  }
  inf.live = true;
  z_stream& zs = inf.zs;
  for (;;) {
    if (begin == end && read < size) refill();
    zs.next_in = in.data() + begin;
    zs.avail_in = static_cast<uInt>(end - begin);
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    begin = end - zs.avail_in;
    const std::uint64_t in_pos = read - (end - begin);  // compressed bytes inflated so far
    const std::size_t got = out.size() - zs.avail_out;
    if (got > 0) consume(out.data(), got, produced);
    produced += got;
    if (rc == Z_STREAM_END) {
      // A gzip file may hold several members back to back (as `cat a.gz b.gz` makes).
      if (end - begin < 2 && read < size) refill();
      if (begin < end && is_gzip(in.data() + begin, end - begin)) {
        inflateReset(&zs);
        continue;
      }
      if (in_pos < size) {
        throw DataError(quoted(file) + ": corrupt gzip file: " + std::to_string(size - in_pos) +
                        " unexpected bytes after the end of the compressed data");
      }
      break;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR || rc == Z_MEM_ERROR) {
      throw DataError(quoted(file) + ": corrupt gzip stream after " + std::to_string(in_pos) +
                      " compressed bytes (zlib: " +
                      (zs.msg ? std::string(zs.msg) : "error " + std::to_string(rc)) +
                      "); re-download or re-extract the file");
    }
    if (in_pos == size && zs.avail_out != 0) {
      // All input consumed, room left for output, but no end of stream: the file was cut short.
      throw DataError(quoted(file) + ": truncated gzip stream: the file ends (" +
                      std::to_string(size) + " bytes) before the compressed data does (" +
                      std::to_string(produced) +
                      " bytes decompressed so far); re-download the file");
    }
  }
}

void read_records(const fs::path& file, std::uint64_t first_byte, std::size_t record_bytes,
                  std::span<const std::int64_t> indices,
                  const std::function<void(const std::uint8_t*, std::int64_t)>& consume) {
  if (record_bytes == 0)
    throw Error("internal: read_records of 0-byte records from " + quoted(file));
  const std::uint64_t size = regular_file_size(file, "a file of fixed-size records");
  File f = open_for_reading(file);
  // Runs of consecutive records in one read each, of up to ~4 MiB.
  const std::size_t per_read = std::max<std::size_t>(1, (std::size_t{4} << 20) / record_bytes);
  std::vector<std::uint8_t> buf;
  for (std::size_t k = 0; k < indices.size();) {
    std::size_t e = k + 1;
    while (e < indices.size() && indices[e] == indices[e - 1] + 1 && e - k < per_read) ++e;
    const std::uint64_t offset = first_byte + static_cast<std::uint64_t>(indices[k]) * record_bytes;
    const std::size_t bytes = (e - k) * record_bytes;
    buf.resize(bytes);
    if (fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
      const int err = errno;
      throw DataError(quoted(file) + ": cannot seek to byte " + std::to_string(offset) + ": " +
                      std::generic_category().message(err));
    }
    fread_exact(f.get(), file, buf.data(), bytes, offset, size);
    for (std::size_t r = k; r < e; ++r) consume(buf.data() + (r - k) * record_bytes, indices[r]);
    k = e;
  }
}

std::vector<std::uint8_t> read_maybe_gzip(const fs::path& file, std::string_view expected,
                                          bool* was_gzip) {
  const std::uint64_t size = regular_file_size(file, expected);
  if (size > std::numeric_limits<std::size_t>::max() / 2) {
    throw DataError(quoted(file) + ": too large (" + std::to_string(size) + " bytes)");
  }
  std::uint8_t magic[2] = {};
  std::uint8_t trailer[4] = {};
  {
    File f = open_for_reading(file);
    fread_exact(f.get(), file, magic, static_cast<std::size_t>(std::min<std::uint64_t>(2, size)), 0,
                size);
    // The gzip trailer's ISIZE (uncompressed size mod 2^32): a first guess for the output.
    if (size >= 18 && fseeko(f.get(), static_cast<off_t>(size - 4), SEEK_SET) == 0)
      fread_exact(f.get(), file, trailer, 4, size - 4, size);
  }
  const bool gz = is_gzip(magic, static_cast<std::size_t>(std::min<std::uint64_t>(2, size)));
  if (was_gzip) *was_gzip = gz;
  if (!gz) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    read_exact(file, bytes.data(), size);
    return bytes;
  }
  // Inflated piece by piece and appended: the output is reserved, not zero-filled first (a memset
  // of Fashion-MNIST's 47 MB was a third of a small run's start-up), and the compressed file is
  // never held whole. Deflate cannot expand by more than ~1032x, which bounds a corrupt trailer.
  const std::uint64_t guess =
      std::min<std::uint64_t>(std::uint64_t{trailer[0]} | std::uint64_t{trailer[1]} << 8 |
                                  std::uint64_t{trailer[2]} << 16 | std::uint64_t{trailer[3]} << 24,
                              size * 1032);
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(std::max<std::uint64_t>(guess, 1 << 16)));
  gunzip_chunked(file, size, [&](const std::uint8_t* data, std::size_t bytes, std::uint64_t) {
    out.insert(out.end(), data, data + bytes);
  });
  return out;
}

std::optional<fs::path> raw_or_gzip(const fs::path& raw, std::string_view expected) {
  fs::path gz = raw;
  gz += ".gz";
  std::error_code ec_raw, ec_gz;
  const bool has_raw = fs::exists(raw, ec_raw), has_gz = fs::exists(gz, ec_gz);
  refuse_link_loop(raw, ec_raw, expected);
  refuse_link_loop(gz, ec_gz, expected);
  if (!has_raw && !has_gz) return std::nullopt;
  if (!has_gz) return raw;
  if (!has_raw) return gz;
  // Both: rare (an extracted copy next to the download), so reading both to compare is affordable.
  if (read_maybe_gzip(raw, expected) != read_maybe_gzip(gz, expected)) {
    throw DataError(quoted(raw) + " and " + quoted(gz) +
                    " are both present and hold different data; remove the one that is not "
                    "meant (one was probably replaced or extracted from another download)");
  }
  return raw;
}

}  // namespace ddp::data::detail
