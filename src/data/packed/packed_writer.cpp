#include "ddp/data/packed_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "../file_io.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "ddp/io/durable_file.hpp"
#include "pack_temporaries.hpp"
#include "packed_h5.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using namespace packed;

struct PackedWriter::State {
  fs::path output, tmp;
  Header h;
  h5::File file;
  std::optional<data::detail::TemporaryLock> lock;  // tells other packs the temporary is in use
  h5::Dataset pixels;                               // images (raw) or encoded
  std::vector<std::uint8_t> buffer;                 // the chunk being filled
  std::int64_t buffered = 0;                        // samples in buffer (raw)
  std::uint64_t written = 0;  // rows (raw: samples, encoded: bytes) already in the file
  std::uint64_t payload = 0;
  std::vector<std::int32_t> labels;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> crcs;
  std::int64_t first_h = -1, first_w = -1;
  std::uint64_t reserved = 0;  // the file's blocks [0, reserved) are allocated
  bool mixed_sizes = false, committed = false;

  [[noreturn]] void fail(const std::string& what) const {
    throw SystemError("cannot write " + data::detail::quoted(output) + ": " + what);
  }
  void check(herr_t status, const std::string& what) const {
    if (status < 0) fail(what + " failed (" + h5::last_error() + ")");
  }

  // Allocates the disk blocks for `bytes` more (and some metadata) before HDF5 writes them, so
  // that a full disk fails here, in our hands, and never inside HDF5 (see discard()).
  void reserve(std::uint64_t bytes, const std::string& what) {
    hsize_t size = 0;
    check(H5Fget_filesize(file, &size), "sizing the file");
    constexpr std::uint64_t kMetadataMargin = std::uint64_t{64} << 10;
    const std::uint64_t end = size + bytes + kMetadataMargin;
    if (end <= reserved) return;
    const int err = lock->reserve(reserved, end - reserved);
    if (err == ENOSPC || err == EDQUOT) fail(what + " failed (" + io::errno_text(err) + ")");
    if (err == 0) reserved = end;
  }

  // Appends rows [0, rows) of buffer to the pixel dataset and records the chunk's CRC.
  void write_chunk(const std::uint8_t* data, std::uint64_t rows, std::size_t bytes) {
    reserve(bytes, "writing a chunk");
    const bool raw = h.encoding == Encoding::raw;
    const std::vector<hsize_t> dims =
        raw ? std::vector<hsize_t>{written + rows, hsize_t(h.channels), hsize_t(h.height),
                                   hsize_t(h.width)}
            : std::vector<hsize_t>{written + rows};
    check(H5Dset_extent(pixels, dims.data()), "growing the pixel dataset");
    h5::Dataspace fs(H5Dget_space(pixels));
    std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
    start[0] = written;
    count[0] = rows;
    check(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
          "selecting a chunk");
    h5::Dataspace ms(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
    check(H5Dwrite(pixels, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, data), "writing a chunk");
    crcs.push_back(crc32_of({data, bytes}));
    written += rows;
  }

  void flush_raw() {
    if (buffered == 0) return;
    write_chunk(buffer.data(), static_cast<std::uint64_t>(buffered),
                static_cast<std::size_t>(buffered * h.image_bytes()));
    buffered = 0;
  }

  // Closes an abandoned file (an error, an interruption, a full disk) without writing it. HDF5
  // 1.10 frees a dataset or file whose close fails to write its cached data (no space left) but
  // keeps its id, and the library's exit-time cleanup then crashes on it (H5F__close_cb); a
  // write that fails for want of space also leaks its buffers, and the exit-time cleanup then
  // ends in "HDF5: infinite loop closing library". reserve() keeps HDF5 from meeting a full disk
  // where the file system can reserve blocks; here, what the close still writes goes to an
  // anonymous memory file instead, so the close succeeds. The temporary file is removed anyway.
  void discard() {
    int* fd = nullptr;
    if (file.valid() && H5Fget_vfd_handle(file, H5P_DEFAULT, reinterpret_cast<void**>(&fd)) >= 0 &&
        fd != nullptr && *fd >= 0) {
      const int sink = ::memfd_create("ddp_pack_discarded", MFD_CLOEXEC);
      if (sink >= 0) {
        ::dup3(sink, *fd, O_CLOEXEC);
        ::close(sink);
      }
    }
    pixels.close();
    file.close();
  }

  template <typename T>
  void write_1d(const char* path, hid_t file_type, hid_t mem_type, const std::vector<T>& v) {
    const hsize_t n = v.size();
    reserve(n * sizeof(T), std::string("writing ") + path);
    h5::Dataspace s(H5Screate_simple(1, &n, nullptr));
    h5::Dataset d(H5Dcreate2(file, path, file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!d.valid()) fail(std::string("creating ") + path + " failed (" + h5::last_error() + ")");
    check(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
          std::string("writing ") + path);
  }
};

PackedWriter::PackedWriter(fs::path output, Header h) : s_(std::make_unique<State>()) {
  State& s = *s_;
  const h5::QuietErrors quiet;
  s.output = std::move(output);
  s.tmp = io::temp_path_for(s.output);
  s.h = std::move(h);
  const bool raw = s.h.encoding == Encoding::raw;
  if (raw) {
    // HDF5 stores every chunk whole: a set smaller than one chunk gets a chunk of its size.
    s.h.samples_per_chunk = raw_samples_per_chunk(s.h.image_bytes());
    if (s.h.samples > 0) s.h.samples_per_chunk = std::min(s.h.samples_per_chunk, s.h.samples);
    s.buffer.resize(static_cast<std::size_t>(s.h.samples_per_chunk * s.h.image_bytes()));
  } else {
    s.h.chunk_bytes =
        s.h.chunk_bytes > 0 ? std::min(s.h.chunk_bytes, kTargetChunkBytes) : kTargetChunkBytes;
    s.buffer.reserve(static_cast<std::size_t>(s.h.chunk_bytes));
  }
  s.file = h5::File(H5Fcreate(s.tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!s.file.valid())
    s.fail("cannot create " + data::detail::quoted(s.tmp) + " (" + h5::last_error() + ")");
  s.lock.emplace(s.tmp);
  const std::vector<hsize_t> dims =
      raw ? std::vector<hsize_t>{0, hsize_t(s.h.channels), hsize_t(s.h.height), hsize_t(s.h.width)}
          : std::vector<hsize_t>{0};
  std::vector<hsize_t> maxdims = dims, chunk = dims;
  maxdims[0] = H5S_UNLIMITED;
  chunk[0] = static_cast<hsize_t>(raw ? s.h.samples_per_chunk : s.h.chunk_bytes);
  h5::Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()));
  h5::PropList dcpl(H5Pcreate(H5P_DATASET_CREATE));
  s.check(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()),
          "setting the chunk size");
  // No chunk cache: each chunk is written whole (buffered here) by the H5Dwrite that adds it, so
  // a full disk fails that write rather than the close (see discard()).
  h5::PropList dapl(H5Pcreate(H5P_DATASET_ACCESS));
  s.check(H5Pset_chunk_cache(dapl, 0, 0, 1.0), "setting the chunk cache");
  s.pixels = h5::Dataset(
      H5Dcreate2(s.file, raw ? kImages : kEncoded, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, dapl));
  if (!s.pixels.valid()) s.fail("creating the pixel dataset failed (" + h5::last_error() + ")");
}

PackedWriter::~PackedWriter() {
  if (s_->committed) return;
  const h5::QuietErrors quiet;
  s_->discard();
  std::error_code ignored;
  fs::remove(s_->tmp, ignored);
}

void PackedWriter::add(std::span<const std::uint8_t> data, std::int32_t label, std::int64_t height,
                       std::int64_t width) {
  State& s = *s_;
  const h5::QuietErrors quiet;
  s.labels.push_back(label);
  s.payload += data.size();
  if (s.first_h < 0) {
    s.first_h = height;
    s.first_w = width;
  } else if (height != s.first_h || width != s.first_w) {
    s.mixed_sizes = true;
  }
  if (s.h.encoding == Encoding::raw) {
    if (static_cast<std::int64_t>(data.size()) != s.h.image_bytes())
      throw Error("internal: packed raw sample of " + std::to_string(data.size()) + " bytes");
    std::memcpy(s.buffer.data() + s.buffered * s.h.image_bytes(), data.data(), data.size());
    if (++s.buffered == s.h.samples_per_chunk) s.flush_raw();
    return;
  }
  s.offsets.push_back(s.offsets.back() + data.size());
  const auto chunk = static_cast<std::size_t>(s.h.chunk_bytes);
  while (!data.empty()) {
    const std::size_t take = std::min(data.size(), chunk - s.buffer.size());
    s.buffer.insert(s.buffer.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(take));
    data = data.subspan(take);
    if (s.buffer.size() == chunk) {
      s.write_chunk(s.buffer.data(), chunk, chunk);
      s.buffer.clear();
    }
  }
}

void PackedWriter::commit() {
  finish();
  publish();
}

void PackedWriter::finish() {
  State& s = *s_;
  const h5::QuietErrors quiet;
  if (s.labels.empty()) s.fail("no samples to pack");
  const bool raw = s.h.encoding == Encoding::raw;
  if (raw) {
    s.flush_raw();
  } else if (!s.buffer.empty()) {
    s.write_chunk(s.buffer.data(), s.buffer.size(), s.buffer.size());
    s.buffer.clear();
  }
  s.h.samples = static_cast<std::int64_t>(s.labels.size());
  if (!raw && !s.mixed_sizes) {
    s.h.height = s.first_h;
    s.h.width = s.first_w;
  }
  s.write_1d(kLabels, H5T_STD_I32LE, H5T_NATIVE_INT32, s.labels);
  s.write_1d(kChunkCrc, H5T_STD_U32LE, H5T_NATIVE_UINT32, s.crcs);
  if (!raw) s.write_1d(kOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, s.offsets);
  {
    std::vector<const char*> names;
    for (const auto& c : s.h.classes) names.push_back(c.c_str());
    const h5::Datatype t = packed::detail::vlen_utf8();
    const hsize_t n = names.size();
    h5::Dataspace sp(H5Screate_simple(1, &n, nullptr));
    h5::Dataset d(H5Dcreate2(s.file, kClasses, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!d.valid()) s.fail("creating classes failed (" + h5::last_error() + ")");
    s.check(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, names.data()), "writing classes");
  }
  const auto bytes_of = [](const auto& v) {
    return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data()),
                                         v.size() * sizeof(v[0]));
  };
  try {
    h5::set_attr_string(s.file, "/", "format", kFormatName);
    h5::set_attr_i64(s.file, "/", "format_version", kFormatVersion);
    h5::set_attr_string(s.file, "/", "encoding", encoding_name(s.h.encoding));
    h5::set_attr_i64(s.file, "/", "channels", s.h.channels);
    if (s.h.fixed_size()) {
      h5::set_attr_i64(s.file, "/", "height", s.h.height);
      h5::set_attr_i64(s.file, "/", "width", s.h.width);
    }
    h5::set_attr_i64(s.file, "/", "samples", s.h.samples);
    h5::set_attr_string(s.file, "/", "source", s.h.source);
    // Checksums as little-endian bytes: the machines we run on are little-endian.
    h5::set_attr_u64(s.file, "/", "labels_crc32", crc32_of(bytes_of(s.labels)));
    if (raw) {
      h5::set_attr_i64(s.file, "/", "samples_per_chunk", s.h.samples_per_chunk);
    } else {
      h5::set_attr_i64(s.file, "/", "chunk_bytes", s.h.chunk_bytes);
      h5::set_attr_u64(s.file, "/", "offsets_crc32", crc32_of(bytes_of(s.offsets)));
    }
    if (!s.h.split.empty()) {
      h5::set_attr_string(s.file, "/", "split", s.h.split);
      h5::set_attr_f64(s.file, "/", "split_fraction", s.h.split_fraction);
      h5::set_attr_u64(s.file, "/", "split_seed", s.h.split_seed);
    }
  } catch (const h5::Failure& e) {
    s.fail(e.what());
  }
  // The close writes the cached metadata: into blocks reserved first (see discard()).
  s.reserve(0, "closing the file");
  s.pixels.close();
  if (s.file.close() < 0) s.fail("closing the file failed (" + h5::last_error() + ")");
  s.lock->release_unused();
  if (const int err = io::fsync_path(s.tmp)) s.fail("fsync: " + io::errno_text(err));
}

void PackedWriter::publish() {
  State& s = *s_;
  std::error_code ec;
  fs::rename(s.tmp, s.output, ec);
  if (ec) s.fail("renaming " + data::detail::quoted(s.tmp) + " into place: " + ec.message());
  s.committed = true;
  const fs::path dir = s.output.has_parent_path() ? s.output.parent_path() : ".";
  if (const int err = io::fsync_path(dir))
    throw SystemError("fsync of directory " + data::detail::quoted(dir) + " after writing " +
                      data::detail::quoted(s.output) + ": " + io::errno_text(err));
}

std::int64_t PackedWriter::samples() const {
  return static_cast<std::int64_t>(s_->labels.size());
}

std::uint64_t PackedWriter::payload_bytes() const {
  return s_->payload;
}

}  // namespace ddp::data
