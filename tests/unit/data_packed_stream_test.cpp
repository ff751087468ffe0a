// PackedStream against read_packed on real packed files: the staged samples are the file's bytes
// (raw, and encoded PNGs decoded on the loader threads, samples spanning chunks), a subset maps to
// its file samples, a cache of one chunk re-reads while a large one reads each chunk once, a
// streaming BatchLoader gives bitwise the in-memory batches (augmented, any thread count), and a
// chunk whose CRC fails is named with its samples when it is streamed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddp/data/loader.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/data/packed_reader.hpp"
#include "ddp/data/packed_stream.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/error.hpp"
#include "png_bytes_util.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;

using testutil::png;

// Pseudo-random pixels (incompressible, so PNGs are about as large as the raw image).
std::vector<std::uint8_t> pixels(std::int64_t i, std::size_t n) {
  std::vector<std::uint8_t> p(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
  for (auto& b : p) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<std::uint8_t>(x);
  }
  return p;
}

class PackedStreamTest : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("ddp_stream_test_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // n samples of 3 x hw x hw in 7 classes; raw, or encoded as PNGs.
  fs::path write(const std::string& name, packed::Encoding e, std::int64_t n, int hw) {
    packed::Header h;
    h.encoding = e;
    h.channels = 3;
    h.height = hw;
    h.width = hw;
    h.source = "test";
    h.classes = {"a", "b", "c", "d", "e", "f", "g"};
    PackedWriter w(dir / name, h);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto p = pixels(i, static_cast<std::size_t>(3 * hw * hw));
      if (e == packed::Encoding::raw) {
        w.add(p, static_cast<std::int32_t>(i % 7), hw, hw);
      } else {
        w.add(png(hw, hw, p), static_cast<std::int32_t>(i % 7), hw, hw);
      }
    }
    w.commit();
    return dir / name;
  }

  // Stages `idx` and checks each staged sample and label against the in-memory dataset (whose
  // sample map[i] is the stream's sample i).
  static void expect_same(PackedStream& s, const SampleSet& mem,
                          const std::vector<std::int64_t>& idx,
                          const std::vector<std::int64_t>& map = {}) {
    s.stage(idx);
    for (const std::int64_t i : idx) {
      const std::int64_t f = map.empty() ? i : map[static_cast<std::size_t>(i)];
      const auto a = s.samples().image(i), b = mem.image(f);
      ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << "sample " << i;
      ASSERT_EQ(s.samples().label(i), mem.label(f));
    }
    s.release(idx);
  }
};

std::vector<std::int64_t> spread(std::int64_t n, std::int64_t step, std::int64_t count) {
  std::vector<std::int64_t> v;
  for (std::int64_t k = 0; k < count; ++k) v.push_back((k * step) % n);
  return v;
}

TEST_F(PackedStreamTest, RawSamplesComeFromTheirChunksThroughABoundedCache) {
  // 3x32x32: 682 samples per ~2 MiB chunk, 4 chunks.
  const fs::path f = write("raw.h5", packed::Encoding::raw, 2500, 32);
  const SampleSet mem = read_packed(f);
  const std::int64_t chunk = 682 * 3 * 32 * 32;
  {
    PackedStream one(f, {chunk, 3});  // one chunk: hopping between chunks re-reads them
    EXPECT_EQ(one.samples().size(), 2500);
    EXPECT_EQ(one.source_size(), 2500);
    const auto idx = spread(2500, 677, 40);
    expect_same(one, mem, idx);
    expect_same(one, mem, idx);
    EXPECT_GT(one.chunks_read(), 8);
  }
  {
    PackedStream all(f, {64 << 20, 2});  // the whole file fits: each chunk is read once
    for (int pass = 0; pass < 3; ++pass) expect_same(all, mem, spread(2500, 911, 300));
    EXPECT_EQ(all.chunks_read(), 4);
  }
  {
    // A subset (as data.train_limit picks one): stream sample i is file sample map[i].
    const std::vector<std::int64_t> map = {2499, 3, 682, 681, 1500};
    PackedStream sub(f, {chunk, 1}, map);
    EXPECT_EQ(sub.samples().size(), 5);
    expect_same(sub, mem, {0, 1, 2, 3, 4}, map);
  }
}

TEST_F(PackedStreamTest, EncodedSamplesAreDecodedAcrossChunkBoundaries) {
  // ~2.3 KiB PNGs of 3x24x24 noise: 2 MiB chunks end inside samples.
  const fs::path f = write("enc.h5", packed::Encoding::encoded, 2000, 24);
  const SampleSet mem = read_packed(f);
  ASSERT_GT(packed::read_header(f).chunk_bytes, 0);
  PackedStream s(f, {3 << 20, 4});
  std::vector<std::int64_t> all(2000);
  for (std::int64_t i = 0; i < 2000; ++i) all[static_cast<std::size_t>(i)] = i;
  expect_same(s, mem, all);
  expect_same(s, mem, spread(2000, 1237, 64));
}

TEST_F(PackedStreamTest, StreamingLoaderGivesTheInMemoryBatches) {
  const fs::path f = write("raw.h5", packed::Encoding::raw, 1500, 32);
  const SampleSet mem = read_packed(f);
  const Normalization norm{{0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}};
  Augmentation aug;
  aug.random_crop = true;
  aug.hflip = true;
  std::vector<RankBatch> batches;
  for (std::int64_t b = 0; b < 12; ++b) batches.push_back({spread(1500, 389 + b, 50), 50, b * 50});
  const auto run = [&](const Dataset& ds, bool prefetch) {
    BatchLoader loader(ds, norm, aug, 17, 50, prefetch);
    loader.start(batches, 3);
    std::vector<float> out;
    while (auto b = loader.next()) out.insert(out.end(), b->images, b->images + 50 * 3 * 32 * 32);
    return out;
  };
  const auto want = run(InMemoryDataset(mem), true);
  for (const int workers : {1, 3}) {
    for (const bool prefetch : {true, false}) {
      PackedStream s(f, {4 << 20, workers});
      EXPECT_EQ(run(s, prefetch), want) << workers << " workers, prefetch " << prefetch;
    }
  }
}

// Images of varying sizes stay encoded, streamed or not: the stream stages each sample's bytes
// (spanning chunks of a 16 KiB chunking, through a cache of about two chunks), and a streaming
// loader with random-resized crops to 16 px fills bitwise the in-memory batches, for a subset too.
TEST_F(PackedStreamTest, VaryingSizesStreamEncodedForResizedCrops) {
  packed::Header h;
  h.encoding = packed::Encoding::encoded;
  h.channels = 3;
  h.source = "test";
  h.classes = {"a", "b", "c"};
  h.chunk_bytes = 16384;
  PackedWriter w(dir / "sizes.h5", h);
  for (std::int64_t i = 0; i < 60; ++i) {
    const int side = 20 + static_cast<int>(i * 7 % 30), width = side + static_cast<int>(i % 5);
    w.add(png(width, side, pixels(i, static_cast<std::size_t>(3 * width * side))),
          static_cast<std::int32_t>(i % 3), side, width);
  }
  w.commit();
  const fs::path f = dir / "sizes.h5";
  ASSERT_EQ(packed::read_header(f).height, 0) << "the sizes should vary";
  const SampleSet mem = read_packed(f);
  ASSERT_TRUE(mem.is_encoded());

  const std::vector<std::int64_t> subset = {59, 3, 17, 40, 41, 0, 28, 33, 12, 50, 7, 21};
  PackedStream s(f, {40 << 10, 2}, subset);
  ASSERT_TRUE(s.samples().is_encoded());
  ASSERT_EQ(s.samples().size(), 12);
  EXPECT_EQ(s.source_size(), 60);
  std::vector<std::int64_t> all(12);
  for (std::int64_t i = 0; i < 12; ++i) all[static_cast<std::size_t>(i)] = i;
  s.stage(all);
  for (std::int64_t i = 0; i < 12; ++i) {
    const auto a = s.samples().encoded_sample(i);
    const auto b = mem.encoded_sample(subset[static_cast<std::size_t>(i)]);
    ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << "sample " << i;
    ASSERT_EQ(s.samples().label(i), mem.label(subset[static_cast<std::size_t>(i)]));
  }
  s.release(all);
  EXPECT_GT(s.chunks_read(), 1);

  Augmentation aug;
  aug.out_size = 16;
  aug.random_resized_crop = true;
  aug.hflip = true;
  const Normalization norm{{0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
  std::vector<RankBatch> batches;
  for (const std::int64_t b : {0, 1, 2}) batches.push_back({spread(12, 5 + 2 * b, 4), 4, b * 4});
  const auto run = [&](const Dataset& ds) {
    BatchLoader loader(ds, norm, aug, 9, 4, true);
    loader.start(batches, 1);
    std::vector<float> out;
    while (auto b = loader.next()) out.insert(out.end(), b->images, b->images + 4 * 3 * 16 * 16);
    return out;
  };
  const auto want = run(InMemoryDataset(mem.gather(subset, "subset")));
  EXPECT_EQ(run(s), want);
}

TEST_F(PackedStreamTest, ACorruptChunkIsNamedWhenStreamed) {
  const fs::path f = write("raw.h5", packed::Encoding::raw, 1500, 32);
  // Sample 1000 (in chunk 1: samples 682..1363) is stored verbatim: find it and flip a byte.
  const auto target = pixels(1000, 3 * 32 * 32);
  std::vector<char> bytes(fs::file_size(f));
  std::ifstream(f, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const auto at =
      std::search(bytes.begin(), bytes.end(), target.begin(), target.end(),
                  [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; });
  ASSERT_NE(at, bytes.end());
  *(at + 10) = static_cast<char>(~*(at + 10));
  std::ofstream(f, std::ios::binary | std::ios::in | std::ios::out)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  PackedStream s(f, {4 << 20, 2});  // opening reads no pixels: the damage is not seen yet
  const std::vector<std::int64_t> good = {0, 681, 1364, 1499};
  EXPECT_NO_THROW(s.stage(good));
  try {
    s.stage(std::vector<std::int64_t>{5, 1000});
    FAIL() << "a corrupt chunk was streamed without an error";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(f.filename().string()), std::string::npos) << m;
    EXPECT_NE(m.find("chunk 1 of 3 (samples 682..1363) has CRC32"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ddp::data
