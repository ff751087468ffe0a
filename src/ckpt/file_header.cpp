#include "file_header.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace ddp::ckpt {
namespace {

constexpr char kMagic[] = "ddp_train snapshot\n";
constexpr std::size_t kMagicBytes = sizeof kMagic - 1;
// HDF5's superblock signature. Ours is always at kHeaderBytes (the user block holds our header);
// HDF5 looks for it at 0, 512, 1024, 2048, ...
constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
constexpr std::size_t kSignatureBytes = sizeof kHdf5Signature - 1;
constexpr char kFormat[] =
    "ddp_train snapshot\nformat_version %lld\nepoch %lld\nstep_in_epoch %lld\nsamples_seen "
    "%lld\nglobal_step %lld\nbytes %llu\ncrc32 %08x\n";
constexpr char kParse[] =
    "ddp_train snapshot\nformat_version %lld\nepoch %lld\nstep_in_epoch %lld\nsamples_seen "
    "%lld\nglobal_step %lld\nbytes %llu\ncrc32 %x\n";

std::uint32_t crc32_of(std::span<const char> bytes) {
  // crc32_z takes a size_t length; zlib's checksum is what Python's zlib.crc32 computes.
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string length_error(std::uint64_t actual, std::uint64_t expected) {
  return (actual < expected ? "truncated: " : "extended: ") + std::to_string(actual) +
         " bytes, its header says " + std::to_string(expected);
}

// Why a file without our exact magic is nevertheless one of ours with a damaged header, or "" for
// a file that has no header at all. Without this, one flipped bit in the magic would switch the
// length and checksum checks off and hand corrupt metadata to HDF5. Ours: the magic with a few
// bytes changed, or any non-zero user block in front of HDF5 data at byte 512 (only a header
// zeroed on purpose, see docs/snapshot_format.md, makes such a file header-less).
std::string damaged_header(std::span<const char> file) {
  const std::size_t n = std::min(file.size(), kMagicBytes);
  std::size_t differing = kMagicBytes - n;
  for (std::size_t i = 0; i < n; ++i) differing += file[i] != kMagic[i];
  const bool near_magic = differing <= 4;
  const bool hdf5_after_block =
      file.size() >= kHeaderBytes + kSignatureBytes &&
      std::memcmp(file.data() + kHeaderBytes, kHdf5Signature, kSignatureBytes) == 0 &&
      std::any_of(file.begin(), file.begin() + kHeaderBytes, [](char c) { return c != 0; });
  if (!near_magic && !hdf5_after_block) return "";
  return "corrupt header: the file starts like a ddp_train snapshot but without its exact first "
         "line 'ddp_train snapshot', so its length and checksum cannot be checked (a file edited "
         "with another tool is read after zeroing its first 512 bytes: dd if=/dev/zero of=FILE "
         "bs=512 count=1 conv=notrunc)";
}

}  // namespace

void stamp_header(std::span<char> image, const TrainingPosition& p, const std::string& run_id) {
  char text[kHeaderBytes] = {};  // the rest of the block stays zero
  // Text, so that `head -c 512 FILE` shows it. The run id follows the fixed lines, so that
  // readers of headers without one (older files) parse them as before.
  const int n =
      std::snprintf(text, sizeof text, kFormat, static_cast<long long>(kFormatVersion),
                    static_cast<long long>(p.epoch), static_cast<long long>(p.step_in_epoch),
                    static_cast<long long>(p.samples_seen), static_cast<long long>(p.global_step),
                    static_cast<unsigned long long>(image.size()),
                    static_cast<unsigned>(crc32_of(image.subspan(kHeaderBytes))));
  if (n > 0 && static_cast<std::size_t>(n) < sizeof text)
    std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n), "run_id %.64s\n",
                  run_id.c_str());
  std::memcpy(image.data(), text, kHeaderBytes);
}

std::optional<Header> parse_header(std::span<const char> file, std::string* error) {
  if (file.size() < kMagicBytes || std::memcmp(file.data(), kMagic, kMagicBytes) != 0) {
    *error = damaged_header(file);
    return std::nullopt;
  }
  if (file.size() < kHeaderBytes) {
    *error = "truncated inside its header";
    return std::nullopt;
  }
  const auto end = std::find(file.begin(), file.begin() + kHeaderBytes, '\0');
  const std::string text(file.begin(), end);
  long long version = 0, epoch = 0, step = 0, samples = 0, global = 0;
  unsigned long long bytes = 0;
  unsigned crc = 0;
  if (std::sscanf(text.c_str(), kParse, &version, &epoch, &step, &samples, &global, &bytes, &crc) !=
      7) {
    *error = "unreadable header";
    return std::nullopt;
  }
  Header h;
  h.format_version = version;
  h.position = {epoch, step, samples, global};
  h.bytes = bytes;
  h.crc32 = crc;
  const std::string key = "\nrun_id ";
  if (const auto at = text.find(key); at != std::string::npos) {
    const auto from = at + key.size();
    h.run_id = text.substr(from, text.find('\n', from) - from);
  }
  return h;
}

std::string verify_file(std::span<const char> file, const Header& header) {
  if (file.size() != header.bytes) return length_error(file.size(), header.bytes);
  if (crc32_of(file.subspan(kHeaderBytes)) != header.crc32)
    return "checksum mismatch: the file is corrupt";
  return "";
}

std::optional<Header> read_header(const std::filesystem::path& file, std::string* error) {
  char buf[kHeaderBytes + kSignatureBytes] = {};  // with HDF5's signature behind a header
  std::ifstream in(file, std::ios::binary);
  in.read(buf, sizeof buf);
  auto header =
      parse_header(std::span<const char>(buf, static_cast<std::size_t>(in.gcount())), error);
  if (!header) return header;
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(file, ec);
  if (ec) {
    *error = ec.message();
    return std::nullopt;
  }
  if (size != header->bytes) {
    *error = length_error(size, header->bytes);
    return std::nullopt;
  }
  return header;
}

std::string verify_whole_file(const std::filesystem::path& file, const Header& header) {
  // In chunks: a large snapshot is checked without holding it in memory.
  std::ifstream in(file, std::ios::binary);
  if (!in) return "cannot read it";
  std::vector<char> chunk(std::size_t{1} << 20);
  std::uint64_t total = 0;
  uLong crc = crc32_z(0, Z_NULL, 0);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    std::size_t from = 0;
    if (total < kHeaderBytes)
      from = static_cast<std::size_t>(std::min<std::uint64_t>(kHeaderBytes - total, n));
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(chunk.data() + from), n - from);
    total += n;
  }
  if (in.bad()) return "cannot read it";
  if (total != header.bytes) return length_error(total, header.bytes);
  if (static_cast<std::uint32_t>(crc) != header.crc32)
    return "checksum mismatch: the file is corrupt";
  return "";
}

std::optional<HeaderInfo> peek_header(const std::filesystem::path& file) {
  std::string error;
  const auto h = read_header(file, &error);
  if (!h) return std::nullopt;
  return HeaderInfo{h->position, h->run_id};
}

}  // namespace ddp::ckpt
