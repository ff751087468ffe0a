#include "ddp/data/packed_fingerprint.hpp"

#include <zlib.h>

#include <vector>

#include "../file_io.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "packed_h5.hpp"

namespace ddp::data::packed {

namespace {

// Feeds the bytes of a value (or of a string with its length, so that "ab"+"c" and "a"+"bc"
// differ) into a running CRC32.
template <typename T>
std::uint32_t feed(std::uint32_t crc, const T& v) {
  return static_cast<std::uint32_t>(
      crc32(crc, reinterpret_cast<const Bytef*>(&v), static_cast<uInt>(sizeof v)));
}
std::uint32_t feed(std::uint32_t crc, const std::string& s) {
  crc = feed(crc, static_cast<std::uint64_t>(s.size()));
  return static_cast<std::uint32_t>(
      crc32(crc, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

}  // namespace

std::string Fingerprint::describe() const {
  return std::to_string(samples) + " samples (" + shape + "), " + std::to_string(file_bytes) +
         " bytes, fingerprint " + detail::hex(crc);
}

Fingerprint fingerprint(const std::filesystem::path& file) {
  const Header h = read_header(file);  // checks the format, version and attributes
  const h5::QuietErrors quiet;
  const h5::File f = detail::open_for_reading(file);
  // raw: the chunk count follows from the attributes; encoded: from the total byte count, which
  // only the offsets hold, so take the stored length (offsets_crc32 covers the offsets).
  const auto dims = detail::dims_of(f, file, kChunkCrc);
  const std::int64_t chunks = h.encoding == Encoding::raw
                                  ? chunk_count(h.samples, h.samples_per_chunk)
                                  : static_cast<std::int64_t>(dims.empty() ? 0 : dims[0]);
  if (dims.size() != 1 || dims[0] != static_cast<std::uint64_t>(chunks))
    throw detail::corrupt(
        file, "'chunk_crc32' does not hold one CRC32 per chunk (" + std::to_string(chunks) + ")");
  std::vector<std::uint32_t> crcs(static_cast<std::size_t>(chunks));
  detail::read_rows(f, file, kChunkCrc, H5T_NATIVE_UINT32, 0, crcs.size(), crcs.data());

  Fingerprint out;
  out.samples = h.samples;
  std::error_code ec;
  out.file_bytes = std::filesystem::file_size(file, ec);
  if (ec) throw DataError(data::detail::quoted(file) + ": " + ec.message());
  std::uint32_t crc = crc32_of(detail::bytes_of(crcs));
  for (const std::int64_t v : {static_cast<std::int64_t>(h.encoding), h.channels, h.height, h.width,
                               h.samples, h.samples_per_chunk, h.chunk_bytes})
    crc = feed(crc, v);
  crc = feed(crc, h.labels_crc32);
  crc = feed(crc, h.offsets_crc32);
  for (const auto& name : h.classes) crc = feed(crc, name);
  out.crc = crc;
  out.shape = std::to_string(h.channels) + "x" +
              (h.fixed_size() ? std::to_string(h.height) + "x" + std::to_string(h.width)
                              : std::string("variable")) +
              " " + encoding_name(h.encoding) + ", " + std::to_string(h.classes.size()) +
              " classes";
  return out;
}

}  // namespace ddp::data::packed
