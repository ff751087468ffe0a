#include "ddp/data/packed_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "../file_io.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/data/utf8_names.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "packed_h5.hpp"

namespace ddp::data::packed {

using data::detail::quoted;

std::string encoding_name(Encoding e) {
  return e == Encoding::raw ? "raw" : "encoded";
}

std::int64_t chunk_count(std::int64_t items, std::int64_t per_chunk) {
  return per_chunk > 0 ? (items + per_chunk - 1) / per_chunk : 0;
}

Range chunk_range(std::int64_t k, std::int64_t items, std::int64_t per_chunk) {
  return {std::min(k * per_chunk, items), std::min((k + 1) * per_chunk, items)};
}

Range samples_overlapping(std::span<const std::uint64_t> offsets, Range bytes) {
  // offsets is non-decreasing: the first sample ending after bytes.begin, up to the first sample
  // starting at or after bytes.end. Empty samples inside the range count as overlapping.
  const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
  const auto b = static_cast<std::uint64_t>(bytes.begin);
  const auto e = static_cast<std::uint64_t>(bytes.end);
  const auto first = std::upper_bound(offsets.begin() + 1, offsets.end(), b) - offsets.begin() - 1;
  const auto last = std::lower_bound(offsets.begin(), offsets.end() - 1, e) - offsets.begin();
  return {std::min<std::int64_t>(first, n), std::min<std::int64_t>(last, n)};
}

std::int64_t raw_samples_per_chunk(std::int64_t image_bytes) {
  return std::max<std::int64_t>(1, kTargetChunkBytes / std::max<std::int64_t>(1, image_bytes));
}

std::uint32_t crc32_of(std::span<const std::uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  constexpr std::size_t kMax = std::size_t{1} << 30;
  for (std::size_t at = 0; at < bytes.size(); at += kMax) {
    const std::size_t n = std::min(kMax, bytes.size() - at);
    crc = crc32(crc, bytes.data() + at, static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

namespace {

std::vector<std::string> read_classes(hid_t f, const std::filesystem::path& file) {
  const auto dims = detail::dims_of(f, file, kClasses);
  if (dims.size() != 1 || dims[0] == 0)
    throw DataError(quoted(file) + ": dataset classes must be a non-empty list of names");
  if (dims[0] > static_cast<std::uint64_t>(kMaxClasses))
    throw DataError(quoted(file) + ": dataset classes names " + std::to_string(dims[0]) +
                    " classes; a packed file holds at most " + std::to_string(kMaxClasses) +
                    " (2^24)");
  h5::Dataset d(H5Dopen2(f, kClasses, H5P_DEFAULT));
  h5::Datatype t(H5Dget_type(d));
  if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) <= 0)
    throw DataError(quoted(file) + ": dataset classes must hold variable-length strings");
  std::vector<char*> names(dims[0], nullptr);
  const h5::Datatype mem = detail::vlen_utf8();
  if (H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, names.data()) < 0)
    throw DataError(quoted(file) + ": cannot read dataset classes (" + h5::last_error() + ")");
  std::vector<std::string> out;
  for (char* s : names) out.emplace_back(s ? s : "");
  h5::Dataspace space(H5Dget_space(d));
  H5Dvlen_reclaim(mem, space, H5P_DEFAULT, names.data());
  // Checked here, when the file is opened: metrics (JSON) would refuse such a name only after an
  // epoch's work (files packed before pack refused them).
  for (std::size_t k = 0; k < out.size(); ++k)
    if (!is_valid_utf8(out[k]))
      throw DataError(quoted(file) + ": class " + std::to_string(k) + " is named '" +
                      escape_bytes(out[k]) +
                      "', which is not valid UTF-8; class names are written as text (metrics, "
                      "reports, TensorBoard): rename the class folder (or the CSV label) to "
                      "UTF-8 and pack it again");
  return out;
}

}  // namespace

Header read_header(const std::filesystem::path& file) {
  const h5::QuietErrors quiet;
  const h5::File f = detail::open_for_reading(file);
  Header h;
  try {
    if (!h5::has_attr(f, "/", "format") || h5::get_attr_string(f, "/", "format") != kFormatName)
      throw DataError(quoted(file) +
                      ": not a ddp_train packed dataset (no root attribute format = '" +
                      kFormatName + "'); make one with ddp_train pack");
    const std::int64_t version = h5::get_attr_i64(f, "/", "format_version");
    if (version != kFormatVersion)
      throw DataError(
          quoted(file) + ": packed format_version " + std::to_string(version) +
          ", but this ddp_train reads format_version " + std::to_string(kFormatVersion) +
          "; pack the data again with this ddp_train (or use the ddp_train that made it)");
    const std::string enc = h5::get_attr_string(f, "/", "encoding");
    if (enc != "raw" && enc != "encoded")
      throw DataError(quoted(file) + ": encoding = '" + enc + "', expected raw or encoded");
    h.encoding = enc == "raw" ? Encoding::raw : Encoding::encoded;
    h.channels = h5::get_attr_i64(f, "/", "channels");
    if (h5::has_attr(f, "/", "height")) {
      h.height = h5::get_attr_i64(f, "/", "height");
      h.width = h5::get_attr_i64(f, "/", "width");
    }
    h.samples = h5::get_attr_i64(f, "/", "samples");
    h.source = h5::get_attr_string(f, "/", "source");
    h.labels_crc32 = static_cast<std::uint32_t>(h5::get_attr_u64(f, "/", "labels_crc32"));
    if (h.encoding == Encoding::raw) {
      h.samples_per_chunk = h5::get_attr_i64(f, "/", "samples_per_chunk");
    } else {
      h.chunk_bytes = h5::get_attr_i64(f, "/", "chunk_bytes");
      h.offsets_crc32 = static_cast<std::uint32_t>(h5::get_attr_u64(f, "/", "offsets_crc32"));
    }
    if (h5::has_attr(f, "/", "split")) {
      h.split = h5::get_attr_string(f, "/", "split");
      h.split_fraction = h5::get_attr_f64(f, "/", "split_fraction");
      h.split_seed = h5::get_attr_u64(f, "/", "split_seed");
    }
  } catch (const h5::Failure& e) {
    throw DataError(quoted(file) + ": " + e.what() + "; the file is not a complete packed dataset");
  }
  const auto bad = [&](const std::string& what) {
    return DataError(quoted(file) + ": " + what + "; the file is corrupt");
  };
  if (h.channels != 1 && h.channels != 3)
    throw bad("channels = " + std::to_string(h.channels) + " (expected 1 or 3)");
  if (h.height < 0 || h.width < 0 || h.height > 65535 || h.width > 65535 ||
      (h.height == 0) != (h.width == 0))
    throw bad("image size " + std::to_string(h.height) + "x" + std::to_string(h.width));
  if (h.encoding == Encoding::raw && !h.fixed_size())
    throw bad("a raw packed file without height and width");
  if (h.samples < 1) throw bad("samples = " + std::to_string(h.samples));
  if (h.encoding == Encoding::raw && h.samples_per_chunk < 1)
    throw bad("samples_per_chunk = " + std::to_string(h.samples_per_chunk));
  if (h.encoding == Encoding::encoded && h.chunk_bytes < 1)
    throw bad("chunk_bytes = " + std::to_string(h.chunk_bytes));
  // Every reader sizes its arrays by `samples`: it must be the labels' count before anything does.
  const auto label_dims = detail::dims_of(f, file, kLabels);
  if (label_dims.size() != 1 || label_dims[0] != static_cast<std::uint64_t>(h.samples))
    throw bad("attribute samples = " + std::to_string(h.samples) + ", but dataset /labels holds " +
              (label_dims.size() == 1 ? std::to_string(label_dims[0]) + " labels"
                                      : std::to_string(label_dims.size()) + " dimensions"));
  h.classes = read_classes(f, file);
  return h;
}

}  // namespace ddp::data::packed
