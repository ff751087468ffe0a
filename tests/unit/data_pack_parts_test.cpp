// The pure parts of packing (CSV lists, .npy headers, chunk arithmetic and CRCs, ImageFolder's
// order rules) and a real-file round trip through PackedWriter and read_packed, raw and encoded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ddp/data/csv_list.hpp"
#include "ddp/data/image_folder.hpp"
#include "ddp/data/npy_file.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/data/packed_reader.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/error.hpp"
#include "png_bytes_util.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PackCsv, HeaderQuotesCrlfAndNames) {
  const auto l = parse_csv_list("path,label\r\n\"a,b.png\",dog\r\n\r\nc.png , cat\n", "L");
  ASSERT_EQ(l.rows.size(), 2u);
  EXPECT_EQ(l.rows[0].path, "a,b.png");
  EXPECT_EQ(l.rows[0].line, 2);
  EXPECT_EQ(l.rows[1].line, 4);
  EXPECT_EQ(l.classes, (std::vector<std::string>{"cat", "dog"}));  // sorted names
  EXPECT_EQ(l.rows[0].label, 1);
  EXPECT_EQ(l.rows[1].label, 0);
}

TEST(PackCsv, IndicesGiveClassesUpToTheLargest) {
  const auto l = parse_csv_list("x.png,3\ny.png,0\n", "L");
  EXPECT_EQ(l.classes.size(), 4u);
  EXPECT_EQ(l.rows[0].label, 3);
}

TEST(PackCsv, ErrorsNameTheLine) {
  EXPECT_EQ(error_of([] { parse_csv_list("a.png,1\nb.png,1,2\n", "L"); }),
            "L line 2: expected 2 columns (path,label), found 3: 'b.png,1,2'");
  EXPECT_NE(error_of([] {
              parse_csv_list("a.png,1\nb.png,-1\n", "L");
            }).find("L line 2: label -1 is negative"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_csv_list("a.png,cat\nb.png,2\n", "L");
            }).find("L line 2: label '2' is a number, but line 1's label 'cat' is a class name"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_csv_list("a.png,\n", "L"); }).find("L line 1: the label is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_csv_list("\"a.png,1\n", "L"); }).find("not closed"),
            std::string::npos);
}

TEST(PackCsv, ByteOrderMarkIsNotText) {
  const auto l = parse_csv_list("\xEF\xBB\xBFpath,label\na.png,dog\n", "L");
  ASSERT_EQ(l.rows.size(), 1u);
  EXPECT_EQ(l.rows[0].path, "a.png");
  EXPECT_EQ(l.rows[0].line, 2);
}

TEST(PackCsv, ClassCountAndNamesBounded) {
  // The largest index names the row; at most 2^24 classes (indices 0..16777215).
  EXPECT_NE(error_of([] {
              parse_csv_list("a.png,0\nb.png,999999999\nc.png,5\n", "L");
            }).find("L line 2: label 999999999 would make 1000000000 classes"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_csv_list("a.png,16777216\n", "L"); }).find("at most 16777216"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_csv_list("a.png,tea\nb.png,caf\xe9\n", "L");
            }).find("L line 2: label 'caf\\xe9' is not valid UTF-8"),
            std::string::npos);
}

// A .npy file as numpy.save writes it (format 1.0, header padded to a multiple of 64).
std::vector<std::uint8_t> npy(const std::string& descr, const std::string& shape,
                              const std::vector<std::uint8_t>& data, int major = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t pre = major == 1 ? 10 : 12;
  while ((pre + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major),
                                   0};
  const std::size_t n = dict.size();
  out.push_back(static_cast<std::uint8_t>(n & 0xff));
  out.push_back(static_cast<std::uint8_t>(n >> 8));
  if (major != 1) out.insert(out.end(), {0, 0});
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

TEST(PackNpy, ParsesHeadersOfBothVersions) {
  const auto b = npy("|u1", "(2, 28, 28, 3)", {});
  const NpyHeader h = parse_npy_header(b, "x");
  EXPECT_EQ(h.kind, 'u');
  EXPECT_EQ(h.item_bytes, 1);
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{2, 28, 28, 3}));
  EXPECT_EQ(h.data_offset % 64, 0u);
  const NpyHeader h2 = parse_npy_header(npy("<i8", "(5,)", {}, 2), "x");
  EXPECT_EQ(h2.shape, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(h2.item_bytes, 8);
}

TEST(PackNpy, LabelsOfAnyIntegerType) {
  // int16 little-endian 1, 258; big-endian int32 7; int8 -1 is refused, naming the index.
  auto b = npy("<i2", "(2,)", {1, 0, 2, 1});
  EXPECT_EQ(npy_int_labels(b, parse_npy_header(b, "x"), "x"), (std::vector<std::int32_t>{1, 258}));
  b = npy(">i4", "(1,)", {0, 0, 0, 7});
  EXPECT_EQ(npy_int_labels(b, parse_npy_header(b, "x"), "x"), (std::vector<std::int32_t>{7}));
  b = npy("|i1", "(2,)", {0, 0xff});
  EXPECT_NE(error_of([&] {
              npy_int_labels(b, parse_npy_header(b, "x"), "x");
            }).find("label -1 at index 1 is out of range"),
            std::string::npos);
  b = npy("<f4", "(1,)", {0, 0, 0, 0});
  EXPECT_NE(
      error_of([&] { npy_int_labels(b, parse_npy_header(b, "x"), "x"); }).find("integer dtype"),
      std::string::npos);
}

TEST(PackNpy, LabelsBoundedToTheClassLimit) {
  // int32 little-endian 0, 200000000 (0x0BEBC200): index 1 named, before any class name is made.
  const auto b = npy("<i4", "(2,)", {0, 0, 0, 0, 0x00, 0xC2, 0xEB, 0x0B});
  EXPECT_NE(error_of([&] {
              npy_int_labels(b, parse_npy_header(b, "x"), "x");
            }).find("x: label 200000000 at index 1 would make 200000001 classes"),
            std::string::npos);
}

TEST(PackNpy, RefusesWhatIsNotNpy) {
  const std::vector<std::uint8_t> junk(32, 'x');
  EXPECT_NE(error_of([&] { parse_npy_header(junk, "f.npy"); }).find("f.npy: no .npy magic"),
            std::string::npos);
}

TEST(PackedFormat, CrcAndChunkArithmetic) {
  const std::string check = "123456789";  // the CRC-32 check value of the standard
  EXPECT_EQ(packed::crc32_of({reinterpret_cast<const std::uint8_t*>(check.data()), check.size()}),
            0xCBF43926u);
  EXPECT_EQ(packed::chunk_count(10, 4), 3);
  EXPECT_EQ(packed::chunk_range(2, 10, 4).begin, 8);
  EXPECT_EQ(packed::chunk_range(2, 10, 4).end, 10);
  EXPECT_EQ(packed::raw_samples_per_chunk(3 * 32 * 32), 682);  // ~2 MiB
  EXPECT_EQ(packed::raw_samples_per_chunk(3 * 4000 * 4000), 1);
  // Samples of 5, 0, 10 and 3 bytes: bytes [4, 8) touch samples 0 and 2 (and the empty sample 1
  // between them); bytes [15, 18) only sample 3.
  const std::vector<std::uint64_t> offsets = {0, 5, 5, 15, 18};
  const auto r = packed::samples_overlapping(offsets, {4, 8});
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.end, 3);
  const auto last = packed::samples_overlapping(offsets, {15, 18});
  EXPECT_EQ(last.begin, 3);
  EXPECT_EQ(last.end, 4);
}

TEST(PackImageFolder, TorchvisionOrderRules) {
  EXPECT_TRUE(has_image_extension("a.JPG"));
  EXPECT_TRUE(has_image_extension("b.Jpeg"));
  EXPECT_TRUE(has_image_extension("c.png"));
  EXPECT_FALSE(has_image_extension("d.gif"));
  EXPECT_FALSE(has_image_extension("png"));
  // sorted(os.walk(...)) sorts whole path strings: ' ' and '-' come before '/'.
  EXPECT_EQ(sorted_walk_roots({"c/sub/z", "c", "c/sub-b", "c/sub", "c/sub b", "c/Sub"}),
            (std::vector<std::string>{"c", "c/Sub", "c/sub", "c/sub b", "c/sub-b", "c/sub/z"}));
}

using testutil::png;

class PackedRoundTrip : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("ddp_pack_test_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  packed::Header header(packed::Encoding e) const {
    packed::Header h;
    h.encoding = e;
    h.channels = 3;
    h.height = 4;
    h.width = 5;
    h.source = "test";
    h.classes = {"a", "b", "c"};
    return h;
  }
};

TEST_F(PackedRoundTrip, EncodedReadsBackEqualToRaw) {
  PackedWriter raw(dir / "raw.h5", header(packed::Encoding::raw));
  PackedWriter enc(dir / "enc.h5", header(packed::Encoding::encoded));
  std::vector<std::uint8_t> all;
  for (int i = 0; i < 7; ++i) {
    std::vector<std::uint8_t> hwc(4 * 5 * 3), chw(hwc.size());
    for (std::size_t k = 0; k < hwc.size(); ++k) hwc[k] = static_cast<std::uint8_t>(i * 31 + k * 7);
    for (int p = 0; p < 20; ++p)
      for (int c = 0; c < 3; ++c)
        chw[static_cast<std::size_t>(c * 20 + p)] = hwc[static_cast<std::size_t>(p * 3 + c)];
    raw.add(chw, i % 3, 4, 5);
    enc.add(png(5, 4, hwc), i % 3, 4, 5);
    all.insert(all.end(), chw.begin(), chw.end());
  }
  raw.commit();
  enc.commit();
  const SampleSet a = read_packed(dir / "raw.h5"), b = read_packed(dir / "enc.h5");
  ASSERT_EQ(a.size(), 7);
  EXPECT_EQ(a.num_classes(), 3);
  EXPECT_TRUE(std::equal(a.pixels().begin(), a.pixels().end(), all.begin(), all.end()));
  EXPECT_TRUE(std::equal(b.pixels().begin(), b.pixels().end(), all.begin(), all.end()));
  EXPECT_TRUE(
      std::equal(a.labels().begin(), a.labels().end(), b.labels().begin(), b.labels().end()));
  EXPECT_EQ(a.label(4), 1);
}

TEST_F(PackedRoundTrip, NoFileUntilCommitAndNoneAfterAnAbandonedWrite) {
  {
    PackedWriter w(dir / "x.h5", header(packed::Encoding::raw));
    w.add(std::vector<std::uint8_t>(60, 1), 0, 4, 5);
    EXPECT_FALSE(fs::exists(dir / "x.h5"));
  }
  EXPECT_TRUE(fs::is_empty(dir));  // the temporary file went with the writer
}

}  // namespace
}  // namespace ddp::data
