#include "ddp/data/packed_stream.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "../file_io.hpp"
#include "ddp/data/image_decode.hpp"
#include "ddp/data/packed_format.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "packed_h5.hpp"

namespace ddp::data {

namespace fs = std::filesystem;
using namespace packed;
using data::detail::quoted;
using packed::detail::bytes_of;
using packed::detail::corrupt;
using packed::detail::hex;

namespace {

using Chunk = std::shared_ptr<const std::vector<std::uint8_t>>;

}  // namespace

struct PackedStream::Impl {
  fs::path file;
  Header h;
  StreamOptions opt;
  std::vector<std::int64_t> samples;   // dataset index -> file sample
  std::vector<std::uint64_t> offsets;  // encoded: the file's byte offsets (samples + 1)
  // Encoded images of varying sizes are served encoded: dataset sample i's bytes go to
  // [view_offsets[i], view_offsets[i + 1]) of the view (no decode on staging).
  bool keep_encoded = false;
  std::vector<std::uint64_t> view_offsets;
  std::vector<std::uint32_t> crcs;
  std::int64_t chunks = 0;
  std::int64_t chunk_bytes = 0;  // the largest chunk's size in bytes
  h5::File f;
  std::mutex h5_mu;  // one HDF5 read at a time (the library serialises them anyway)

  // The view's pixel storage: reserved address space, resident only while staged.
  std::uint8_t* map = nullptr;
  std::size_t map_bytes = 0;

  // The LRU chunk cache; `loading` holds chunks a thread is reading (others wait for it).
  std::mutex mu;
  std::condition_variable cv;
  std::list<std::int64_t> lru;  // most recent first
  struct Entry {
    Chunk data;
    std::list<std::int64_t>::iterator pos;
  };
  std::unordered_map<std::int64_t, Entry> cache;
  std::unordered_set<std::int64_t> loading;
  std::int64_t cached_bytes = 0;
  std::int64_t reads = 0;

  // Loader threads: stage tasks first, then prefetch tasks.
  std::deque<std::function<void()>> urgent, background;
  bool stop = false;
  std::vector<std::thread> threads;

  ~Impl() {
    {
      const std::lock_guard lk(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    if (map) munmap(map, map_bytes);
  }

  void worker() {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !urgent.empty() || !background.empty(); });
      if (stop) return;
      auto& q = urgent.empty() ? background : urgent;
      auto task = std::move(q.front());
      q.pop_front();
      lk.unlock();
      task();
      lk.lock();
    }
  }

  Range chunk_items(std::int64_t k) const {
    return h.encoding == Encoding::raw
               ? chunk_range(k, h.samples, h.samples_per_chunk)
               : chunk_range(k, static_cast<std::int64_t>(offsets.back()), h.chunk_bytes);
  }

  // Reads chunk k from the file and checks its CRC (no lock held).
  Chunk read_chunk(std::int64_t k) {
    const Range r = chunk_items(k);
    const std::int64_t unit = h.encoding == Encoding::raw ? h.image_bytes() : 1;
    auto data = std::make_shared<std::vector<std::uint8_t>>(
        static_cast<std::size_t>((r.end - r.begin) * unit));
    {
      const std::lock_guard lk(h5_mu);
      const h5::QuietErrors quiet;
      packed::detail::read_rows(f, file, h.encoding == Encoding::raw ? kImages : kEncoded,
                                H5T_NATIVE_UINT8, static_cast<std::uint64_t>(r.begin),
                                static_cast<std::uint64_t>(r.end - r.begin), data->data());
    }
    const std::uint32_t got = crc32_of(*data), want = crcs[static_cast<std::size_t>(k)];
    if (got != want) {
      const Range s = h.encoding == Encoding::raw ? r : samples_overlapping(offsets, r);
      throw corrupt(file, "chunk " + std::to_string(k) + " of " + std::to_string(chunks) +
                              " (samples " + std::to_string(s.begin) + ".." +
                              std::to_string(s.end - 1) + ") has CRC32 " + hex(got) +
                              " but the file records " + hex(want));
    }
    return data;
  }

  // Chunk k from the cache, or read (once, whoever asks first) and cached.
  Chunk get(std::int64_t k) {
    std::unique_lock lk(mu);
    for (;;) {
      if (auto it = cache.find(k); it != cache.end()) {
        lru.splice(lru.begin(), lru, it->second.pos);
        return it->second.data;
      }
      if (!loading.contains(k)) break;
      cv.wait(lk);
    }
    loading.insert(k);
    ++reads;
    lk.unlock();
    Chunk data;
    try {
      data = read_chunk(k);
    } catch (...) {
      lk.lock();
      loading.erase(k);
      cv.notify_all();
      throw;
    }
    lk.lock();
    loading.erase(k);
    lru.push_front(k);
    cache.emplace(k, Entry{data, lru.begin()});
    cached_bytes += static_cast<std::int64_t>(data->size());
    // Evict the least recently used (never the one just read); a chunk still being copied from
    // lives on through its shared_ptr until that copy ends.
    while (cached_bytes > opt.cache_bytes && lru.size() > 1) {
      const std::int64_t old = lru.back();
      lru.pop_back();
      auto it = cache.find(old);
      cached_bytes -= static_cast<std::int64_t>(it->second.data->size());
      cache.erase(it);
    }
    cv.notify_all();
    return data;
  }

  std::uint8_t* slot(std::int64_t i) const {
    return map + (keep_encoded ? view_offsets[static_cast<std::size_t>(i)]
                               : static_cast<std::size_t>(i * h.image_bytes()));
  }
  // Sample i's byte range in the view.
  std::pair<std::int64_t, std::int64_t> slot_range(std::int64_t i) const {
    if (keep_encoded)
      return {static_cast<std::int64_t>(view_offsets[static_cast<std::size_t>(i)]),
              static_cast<std::int64_t>(view_offsets[static_cast<std::size_t>(i) + 1])};
    return {i * h.image_bytes(), (i + 1) * h.image_bytes()};
  }

  // Writes dataset sample i into its place in the view.
  void stage_one(std::int64_t i) {
    const std::int64_t s = samples[static_cast<std::size_t>(i)];
    if (h.encoding == Encoding::raw) {
      const std::int64_t k = s / h.samples_per_chunk;
      const Chunk c = get(k);
      std::memcpy(slot(i), c->data() + (s - k * h.samples_per_chunk) * h.image_bytes(),
                  static_cast<std::size_t>(h.image_bytes()));
      return;
    }
    const auto b = static_cast<std::int64_t>(offsets[static_cast<std::size_t>(s)]);
    const auto e = static_cast<std::int64_t>(offsets[static_cast<std::size_t>(s) + 1]);
    std::vector<std::uint8_t> buffer;
    if (!keep_encoded) buffer.resize(static_cast<std::size_t>(e - b));
    std::uint8_t* bytes = keep_encoded ? slot(i) : buffer.data();
    for (std::int64_t k = b / h.chunk_bytes; k * h.chunk_bytes < e; ++k) {
      const Chunk c = get(k);  // a sample may span chunks
      const std::int64_t lo = std::max(b, k * h.chunk_bytes);
      const std::int64_t hi = std::min(e, k * h.chunk_bytes + static_cast<std::int64_t>(c->size()));
      std::memcpy(bytes + (lo - b), c->data() + (lo - k * h.chunk_bytes),
                  static_cast<std::size_t>(hi - lo));
    }
    if (keep_encoded) return;  // decoded by the loader's resized-crop transform
    const Image img = decode_image(buffer, quoted(file) + ": sample " + std::to_string(s),
                                   static_cast<int>(h.channels));
    if (img.height != h.height || img.width != h.width)
      throw DataError(quoted(file) + ": sample " + std::to_string(s) + " is " +
                      std::to_string(img.width) + "x" + std::to_string(img.height) +
                      " but the file's images are " + std::to_string(h.width) + "x" +
                      std::to_string(h.height));
    std::memcpy(slot(i), img.pixels.data(), img.pixels.size());
  }

  // The chunks sample i needs.
  void chunks_of(std::int64_t i, std::vector<std::int64_t>& out) const {
    const std::int64_t s = samples[static_cast<std::size_t>(i)];
    if (h.encoding == Encoding::raw) {
      out.push_back(s / h.samples_per_chunk);
      return;
    }
    const auto b = static_cast<std::int64_t>(offsets[static_cast<std::size_t>(s)]);
    const auto e = static_cast<std::int64_t>(offsets[static_cast<std::size_t>(s) + 1]);
    for (std::int64_t k = b / h.chunk_bytes; k * h.chunk_bytes < e; ++k) out.push_back(k);
  }
};

PackedStream::PackedStream(const fs::path& file, StreamOptions opt,
                           std::vector<std::int64_t> samples)
    : impl_(std::make_shared<Impl>()) {
  Impl& m = *impl_;
  m.file = file;
  m.opt = opt;
  m.opt.workers = std::max(1, opt.workers);
  m.h = read_header(file);
  const Header& h = m.h;
  const h5::QuietErrors quiet;
  m.f = packed::detail::open_for_reading(file);
  const auto classes = static_cast<std::int64_t>(h.classes.size());
  if (classes > kMaxClasses)
    throw DataError(quoted(file) + ": " + std::to_string(classes) + " classes (at most " +
                    std::to_string(kMaxClasses) + ")");
  m.keep_encoded = h.encoding == Encoding::encoded && !h.fixed_size();
  const auto n = static_cast<std::uint64_t>(h.samples);
  if (packed::detail::dims_of(m.f, file, kLabels) != std::vector<std::uint64_t>{n})
    throw corrupt(file, "dataset /labels does not hold one label per sample");
  std::vector<std::int32_t> labels32(n);
  packed::detail::read_rows(m.f, file, kLabels, H5T_NATIVE_INT32, 0, n, labels32.data());
  if (const auto crc = crc32_of(bytes_of(labels32)); crc != h.labels_crc32)
    throw corrupt(
        file, "the labels have CRC32 " + hex(crc) + " but the file records " + hex(h.labels_crc32));

  std::int64_t items = h.samples, per = h.samples_per_chunk;
  if (h.encoding == Encoding::raw) {
    const auto want = std::vector<std::uint64_t>{n, static_cast<std::uint64_t>(h.channels),
                                                 static_cast<std::uint64_t>(h.height),
                                                 static_cast<std::uint64_t>(h.width)};
    if (packed::detail::dims_of(m.f, file, kImages) != want)
      throw corrupt(file, "dataset /images does not have the header's shape");
    m.chunk_bytes = per * h.image_bytes();
  } else {
    if (packed::detail::dims_of(m.f, file, kOffsets) != std::vector<std::uint64_t>{n + 1})
      throw corrupt(file, "dataset /offsets does not hold one offset per sample plus one");
    m.offsets.resize(n + 1);
    packed::detail::read_rows(m.f, file, kOffsets, H5T_NATIVE_UINT64, 0, n + 1, m.offsets.data());
    if (const auto crc = crc32_of(bytes_of(m.offsets)); crc != h.offsets_crc32)
      throw corrupt(file, "the offsets have CRC32 " + hex(crc) + " but the file records " +
                              hex(h.offsets_crc32));
    if (m.offsets[0] != 0 || !std::is_sorted(m.offsets.begin(), m.offsets.end()) ||
        packed::detail::dims_of(m.f, file, kEncoded) != std::vector<std::uint64_t>{m.offsets[n]})
      throw corrupt(file, "the offsets do not describe the encoded bytes");
    items = static_cast<std::int64_t>(m.offsets[n]);
    per = h.chunk_bytes;
    m.chunk_bytes = per;
  }
  m.chunks = chunk_count(items, per);
  if (packed::detail::dims_of(m.f, file, kChunkCrc) !=
      std::vector<std::uint64_t>{static_cast<std::uint64_t>(m.chunks)})
    throw corrupt(file, "dataset /chunk_crc32 does not hold one CRC per chunk");
  m.crcs.resize(static_cast<std::size_t>(m.chunks));
  packed::detail::read_rows(m.f, file, kChunkCrc, H5T_NATIVE_UINT32, 0, m.crcs.size(),
                            m.crcs.data());

  if (samples.empty()) {
    samples.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) samples[i] = static_cast<std::int64_t>(i);
  }
  std::vector<Label> labels(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::int64_t s = samples[i];
    if (s < 0 || s >= h.samples)
      throw DataError(quoted(file) + ": sample " + std::to_string(s) +
                      " asked for, but the file holds " + std::to_string(h.samples));
    const std::int32_t l = labels32[static_cast<std::size_t>(s)];
    if (l < 0 || l >= classes)
      throw DataError(quoted(file) + ": sample " + std::to_string(s) + " has label " +
                      std::to_string(l) + ", but the file names " + std::to_string(classes) +
                      " classes");
    labels[i] = l;
  }
  m.samples = std::move(samples);

  std::size_t view_bytes = m.samples.size() * static_cast<std::size_t>(h.image_bytes());
  if (m.keep_encoded) {
    m.view_offsets.assign(1, 0);
    for (const std::int64_t s : m.samples)
      m.view_offsets.push_back(m.view_offsets.back() + m.offsets[static_cast<std::size_t>(s) + 1] -
                               m.offsets[static_cast<std::size_t>(s)]);
    view_bytes = m.view_offsets.back();
  }
  // Address space only: MAP_NORESERVE pages cost nothing until stage() writes them.
  m.map_bytes = std::max<std::size_t>(1, view_bytes);
  void* p = mmap(nullptr, m.map_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw SystemError(quoted(file) + ": cannot reserve " + std::to_string(m.map_bytes) +
                      " bytes of address space for streaming it");
  m.map = static_cast<std::uint8_t*>(p);

  // The labels live in a buffer the view's owner keeps alongside the stream's state.
  struct Owner {
    std::shared_ptr<Impl> impl;
    std::vector<Label> labels;
  };
  auto owner = std::make_shared<Owner>(Owner{impl_, std::move(labels)});
  const auto count = static_cast<std::int64_t>(m.samples.size());
  if (m.keep_encoded)
    view_ = SampleSet::encoded_view(quoted(file), h.channels, static_cast<int>(classes), owner,
                                    {m.map, view_bytes}, m.view_offsets, owner->labels);
  else
    view_ = SampleSet(quoted(file), count, h.channels, h.height, h.width, static_cast<int>(classes),
                      owner, {m.map, view_bytes}, owner->labels);

  for (int t = 0; t < m.opt.workers; ++t) m.threads.emplace_back(&Impl::worker, &m);
}

PackedStream::~PackedStream() = default;

void PackedStream::stage(std::span<const std::int64_t> indices) const {
  Impl& m = *impl_;
  const std::size_t n = indices.size();
  std::vector<std::exception_ptr> errors(n);
  std::size_t done = 0;
  std::mutex done_mu;
  std::condition_variable done_cv;
  {
    const std::lock_guard lk(m.mu);
    for (std::size_t j = 0; j < n; ++j) {
      m.urgent.emplace_back([&, j] {
        try {
          m.stage_one(indices[j]);
        } catch (...) {
          errors[j] = std::current_exception();
        }
        const std::lock_guard dl(done_mu);
        if (++done == n) done_cv.notify_all();
      });
    }
  }
  m.cv.notify_all();
  std::unique_lock dl(done_mu);
  done_cv.wait(dl, [&] { return done == n; });
  // The first failing sample of the batch, whatever the thread timing.
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void PackedStream::release(std::span<const std::int64_t> indices) const {
  const Impl& m = *impl_;
  const auto page = static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<std::uintptr_t>(m.map);
  for (const std::int64_t i : indices) {
    // Whole pages only; a page shared with a neighbour is freed too (it is re-staged if needed).
    const auto [b, e] = m.slot_range(i);
    if (e == b) continue;
    const std::int64_t lo = b / page * page;
    const std::int64_t hi = std::min<std::int64_t>((e + page - 1) / page * page,
                                                   static_cast<std::int64_t>(m.map_bytes));
    madvise(reinterpret_cast<void*>(base + static_cast<std::uintptr_t>(lo)),
            static_cast<std::size_t>(hi - lo), MADV_DONTNEED);
  }
}

void PackedStream::prefetch(std::span<const std::int64_t> indices) const {
  Impl& m = *impl_;
  std::vector<std::int64_t> ks;
  for (const std::int64_t i : indices) m.chunks_of(i, ks);
  // Half the cache, so prefetched chunks do not push out the ones the current batch is using.
  const std::int64_t budget =
      std::max<std::int64_t>(1, m.opt.cache_bytes / 2 / std::max<std::int64_t>(1, m.chunk_bytes));
  std::unordered_set<std::int64_t> seen;
  const std::lock_guard lk(m.mu);
  for (const std::int64_t k : ks) {
    if (static_cast<std::int64_t>(seen.size()) >= budget) break;
    if (!seen.insert(k).second || m.cache.contains(k) || m.loading.contains(k)) continue;
    m.background.emplace_back([&m, k] {
      try {
        m.get(k);
      } catch (...) {
        // Reported by the stage() that needs this chunk (it reads it again).
      }
    });
  }
  m.cv.notify_all();
}

std::int64_t PackedStream::source_size() const {
  return impl_->h.samples;
}

std::vector<std::int64_t> PackedStream::chunk_of_samples() const {
  const Impl& m = *impl_;
  std::vector<std::int64_t> out(m.samples.size());
  std::vector<std::int64_t> ks;
  for (std::size_t i = 0; i < m.samples.size(); ++i) {
    ks.clear();
    m.chunks_of(static_cast<std::int64_t>(i), ks);
    out[i] = ks.empty() ? 0 : ks.front();
  }
  return out;
}

std::int64_t PackedStream::chunks_read() const {
  const std::lock_guard lk(impl_->mu);
  return impl_->reads;
}

}  // namespace ddp::data
