#include "ddp/data/distribute.hpp"

#include <mpi.h>

#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>

#include "ddp/comm/mpi_comm.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

// What rank 0 tells everyone before the bytes: the shape, or the reason it could not read.
struct BroadcastHeader {
  std::int64_t ok = 0, n = 0, c = 0, h = 0, w = 0, classes = 0;
  std::int64_t encoded = 0, bytes = 0;  // images of varying sizes, kept encoded: their bytes
  std::int64_t source = 0;              // the samples a limit picked these from
  char text[1024] = {};                 // origin, or the error message
};

// Owns an MPI shared-memory window (and the node communicator) for the lifetime of every SampleSet
// viewing it. MPI_Win_free is collective over the node; all ranks drop their datasets together.
struct SharedWindow {
  MPI_Win win = MPI_WIN_NULL;
  ~SharedWindow() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && win != MPI_WIN_NULL) MPI_Win_free(&win);
  }
};

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw SystemError(std::string(what) + " failed while sharing the dataset");
}

// The node and leader communicators wait under the world communicator's timeout.
comm::CommOptions options_of(const comm::Communicator& world) {
  comm::CommOptions o;
  if (const auto* mpi = dynamic_cast<const comm::MpiComm*>(&world)) o.timeout_s = mpi->timeout();
  return o;
}

std::size_t aligned(std::size_t offset, std::size_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

LimitedSet broadcast_samples(const std::function<LimitedSet()>& read, comm::Communicator& world,
                             const std::string& setting) {
  const int rank = world.rank();
  BroadcastHeader hdr;
  std::optional<SampleSet> local;
  std::string error;
  if (rank == 0) {
    try {
      LimitedSet got = read();
      hdr.source = got.source_size;
      local = std::move(got.samples);
      hdr.ok = 1;
      hdr.encoded = local->is_encoded() ? 1 : 0;
      // An encoded head() view's bytes end at its last offset, before the buffer's end.
      hdr.bytes =
          static_cast<std::int64_t>(hdr.encoded ? local->offsets().back() : local->pixels().size());
      hdr.n = local->size();
      hdr.c = local->channels();
      hdr.h = local->height();
      hdr.w = local->width();
      hdr.classes = local->num_classes();
      std::strncpy(hdr.text, local->origin().c_str(), sizeof hdr.text - 1);
    } catch (const Error& e) {
      error = e.what();
      std::strncpy(hdr.text, e.what(), sizeof hdr.text - 1);
    } catch (const std::bad_alloc&) {
      // Every rank must hear of it: the others wait for this header.
      error = "out of memory reading the dataset on rank 0";
      std::strncpy(hdr.text, error.c_str(), sizeof hdr.text - 1);
    }
  }
  // Through the Communicator: a rank 0 stuck reading (a hung file system) is reported by the
  // others after comm.timeout_s, naming it, instead of hanging the job.
  world.broadcast(std::as_writable_bytes(std::span<BroadcastHeader>(&hdr, 1)), 0);
  if (!hdr.ok) {
    if (rank == 0) throw DataError(error);
    throw DataError("rank 0 could not read the dataset (" + setting + "): " + hdr.text);
  }

  // One window per node (key = world rank, so world rank 0 is node rank 0 and leader rank 0).
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  check(MPI_Comm_split(MPI_COMM_WORLD, node_rank == 0 ? 0 : MPI_UNDEFINED, world_rank, &leaders),
        "MPI_Comm_split");

  // The labels after the pixels (or encoded bytes), then an encoded set's offsets, each aligned.
  const std::size_t pixel_bytes = static_cast<std::size_t>(hdr.bytes);
  const std::size_t label_offset = aligned(pixel_bytes, alignof(Label));
  const std::size_t label_bytes = static_cast<std::size_t>(hdr.n) * sizeof(Label);
  const std::size_t offsets_offset = aligned(label_offset + label_bytes, alignof(std::uint64_t));
  const std::size_t offsets_count = hdr.encoded ? static_cast<std::size_t>(hdr.n) + 1 : 0;
  const std::size_t bytes = offsets_offset + offsets_count * sizeof(std::uint64_t);
  auto shared = std::make_shared<SharedWindow>();
  void* base = nullptr;
  check(MPI_Win_allocate_shared(node_rank == 0 ? static_cast<MPI_Aint>(bytes) : 0, 1, MPI_INFO_NULL,
                                node, &base, &shared->win),
        "MPI_Win_allocate_shared");
  MPI_Aint size = 0;
  int disp = 0;
  check(MPI_Win_shared_query(shared->win, 0, &size, &disp, &base), "MPI_Win_shared_query");
  auto* p = static_cast<std::uint8_t*>(base);
  const comm::CommOptions options = options_of(world);
  if (node_rank == 0) {
    if (rank == 0) {
      std::memcpy(p, local->pixels().data(), pixel_bytes);  // offsets start at 0
      std::memcpy(p + label_offset, local->labels().data(), label_bytes);
      if (hdr.encoded)
        std::memcpy(p + offsets_offset, local->offsets().data(),
                    offsets_count * sizeof(std::uint64_t));
      local.reset();  // rank 0 too keeps only the shared copy
    }
    comm::MpiComm between_nodes(leaders, options);
    between_nodes.broadcast(std::as_writable_bytes(std::span<std::uint8_t>(p, bytes)), 0);
  }
  {
    // The node's other ranks read the window once its leader has filled it.
    comm::MpiComm on_node(node, options);
    on_node.barrier();
  }
  if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  MPI_Comm_free(&node);
  const std::span<const Label> labels(reinterpret_cast<const Label*>(p + label_offset),
                                      static_cast<std::size_t>(hdr.n));
  if (hdr.encoded)
    return {SampleSet::encoded_view(
                hdr.text, hdr.c, static_cast<int>(hdr.classes), shared,
                std::span<const std::uint8_t>(p, pixel_bytes),
                std::span<const std::uint64_t>(
                    reinterpret_cast<const std::uint64_t*>(p + offsets_offset), offsets_count),
                labels),
            hdr.source};
  return {SampleSet(hdr.text, hdr.n, hdr.c, hdr.h, hdr.w, static_cast<int>(hdr.classes), shared,
                    std::span<const std::uint8_t>(p, pixel_bytes), labels),
          hdr.source};
}

int ranks_on_node() {
  int world_rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

LimitedSet load_distributed(const Options& opt, Split split, std::uint64_t seed,
                            comm::Communicator& world) {
  // Rank 0 reads only the kept samples and the node shares only those.
  if (opt.distribute == "broadcast")
    return broadcast_samples([&] { return read_limited(opt, split, seed); }, world);
  if (opt.distribute == "each-reads") return read_limited(opt, split, seed);
  throw ConfigError("data.distribute = '" + opt.distribute + "': expected each-reads or broadcast");
}

}  // namespace ddp::data
