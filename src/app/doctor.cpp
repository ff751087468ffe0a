#include "ddp/app/doctor.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ddp/app/compute.hpp"
#include "ddp/app/config_agreement.hpp"
#include "ddp/app/doctor_nccl.hpp"
#include "ddp/app/threads.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/backend/device_assign.hpp"
#include "ddp/comm/collective_check.hpp"
#include "ddp/comm/comm_options.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/data/packed_fingerprint.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/cpu_binding.hpp"
#include "ddp/runtime/gather.hpp"
#include "ddp/runtime/launch_check.hpp"
#include "ddp/runtime/network.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/version_info.hpp"

namespace ddp::app {
namespace {

using runtime::RecordReader;
using runtime::RecordWriter;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What one rank found out on its own; gathered so that every rank can judge the whole job.
struct RankReport {
  runtime::RankInfo info;
  std::string config_error;  // "" when the configuration loads on this rank
  std::vector<std::string> launch_errors, launch_warnings;
  std::string device_error;  // "" when fine
  std::string device_note;   // e.g. "no GPU visible: trains on the CPU"
  std::int64_t device_index = -1;
  std::string device_uuid, device_name;
  std::string dataset_error;  // "" when readable (or not needed)
  std::string
      dataset_summary;  // "60000 train + 10000 test samples, crc32 1a2b3c4d"; "" if not read
  // Packed datasets: the train and test file's fingerprint (data::packed::Fingerprint::describe),
  // compared file by file across ranks; empty when not read.
  std::vector<std::string> packed_fingerprints;
  runtime::HostNetwork network;
  std::string collective_error;

  std::string encode() const {
    RecordWriter w;
    runtime::write_rank_info(w, info);
    w.put(config_error);
    for (const auto* list : {&launch_errors, &launch_warnings}) {
      w.put(static_cast<std::int64_t>(list->size()));
      for (const auto& s : *list) w.put(s);
    }
    w.put(device_error).put(device_note).put(device_index).put(device_uuid).put(device_name);
    w.put(dataset_error).put(dataset_summary);
    w.put(static_cast<std::int64_t>(packed_fingerprints.size()));
    for (const auto& s : packed_fingerprints) w.put(s);
    w.put(network.host).put(network.nccl_socket_ifname).put(network.mpi_if_include);
    w.put(network.mpi_if_exclude).put(static_cast<std::int64_t>(network.interfaces.size()));
    for (const auto& i : network.interfaces)
      w.put(i.name)
          .put(i.address)
          .put(std::int64_t{i.prefix_len})
          .put(std::int64_t{i.up})
          .put(std::int64_t{i.loopback});
    w.put(collective_error);
    return w.bytes();
  }

  static RankReport decode(const std::string& bytes) {
    RecordReader in(bytes);
    RankReport r;
    r.info = runtime::read_rank_info(in);
    r.config_error = in.get_str();
    for (auto* list : {&r.launch_errors, &r.launch_warnings}) {
      const auto n = in.get_int();
      for (std::int64_t k = 0; k < n; ++k) list->push_back(in.get_str());
    }
    r.device_error = in.get_str();
    r.device_note = in.get_str();
    r.device_index = in.get_int();
    r.device_uuid = in.get_str();
    r.device_name = in.get_str();
    r.dataset_error = in.get_str();
    r.dataset_summary = in.get_str();
    for (std::int64_t k = 0, n = in.get_int(); k < n; ++k)
      r.packed_fingerprints.push_back(in.get_str());
    r.network.host = in.get_str();
    r.network.nccl_socket_ifname = in.get_str();
    r.network.mpi_if_include = in.get_str();
    r.network.mpi_if_exclude = in.get_str();
    const auto n = in.get_int();
    for (std::int64_t k = 0; k < n; ++k) {
      runtime::NetInterface i;
      i.name = in.get_str();
      i.address = in.get_str();
      i.prefix_len = static_cast<int>(in.get_int());
      i.up = in.get_int() != 0;
      i.loopback = in.get_int() != 0;
      r.network.interfaces.push_back(i);
    }
    r.collective_error = in.get_str();
    return r;
  }
};

// The GPU this rank would train on, or why none (as training chooses it).
void examine_device(const Config& cfg, const runtime::Runtime& rt,
                    const std::vector<std::string>& hosts,
                    const std::vector<std::string>& device_sets, RankReport& me) {
  // The plugin loaded (or refused) even where no driver is found, which training skips: doctor
  // reports it as it is.
  (void)plugin::cuda_plugin_status();
  const DeviceChoice c = choose_device(cfg.runtime.device, rt, hosts, device_sets);
  me.info.device = c.device_string();
  me.device_error = c.error;
  me.device_note = c.note;
  me.device_index = c.index;
  me.device_uuid = c.uuid;
  me.device_name = c.name;
}

std::string crc_hex(const data::SampleSet& a, const data::SampleSet& b) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto* d : {&a, &b}) {
    for (const auto span : {std::as_bytes(d->pixels()), std::as_bytes(d->labels())}) {
      // zlib takes 32-bit lengths: feed large buffers in pieces.
      for (std::size_t off = 0; off < span.size(); off += std::size_t{1} << 30) {
        const std::size_t len = std::min(span.size() - off, std::size_t{1} << 30);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(span.data()) + off, static_cast<uInt>(len));
      }
    }
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(crc));
  return buf;
}

// Reads both splits in full, as training would: the strongest check that the files are there,
// readable and well-formed on this rank, and a checksum that shows whether every host has the same
// copy.
void examine_dataset(const Config& cfg, const runtime::Runtime& rt, const DoctorOptions& options,
                     RankReport& me) {
  if (!options.dataset_configured) return;
  if (cfg.data.distribute == "broadcast" && rt.rank() != 0) return;  // rank 0 reads for all
  try {
    if (cfg.data.dataset == "packed") {
      // Packed files are compared by their stored checksums (cheap, even for files larger than
      // memory), file by file, so that the verdict names the file whose copy differs.
      std::int64_t samples[2] = {0, 0};
      int k = 0;
      for (const auto* file : {&cfg.data.train_file, &cfg.data.test_file}) {
        const auto fp = data::packed::fingerprint(*file);
        samples[k++] = fp.samples;
        me.packed_fingerprints.push_back(fp.describe());
      }
      // Held in memory (cache_mb = 0), training reads every chunk at start: so does the doctor,
      // checking each chunk's CRC. Streamed files are checked chunk by chunk as training reads
      // them.
      if (cfg.data.cache_mb == 0) {
        (void)data::read_dataset(cfg.data, data::Split::train);
        (void)data::read_dataset(cfg.data, data::Split::test);
      }
      me.dataset_summary = std::to_string(samples[0]) + " train + " + std::to_string(samples[1]) +
                           " test samples" +
                           (cfg.data.cache_mb == 0 ? ", every chunk's CRC32 checked"
                                                   : " (streamed: fingerprints only)");
      return;
    }
    const auto train = data::read_dataset(cfg.data, data::Split::train);
    const auto test = data::read_dataset(cfg.data, data::Split::test);
    me.dataset_summary = std::to_string(train.size()) + " train + " + std::to_string(test.size()) +
                         " test samples, crc32 " + crc_hex(train, test);
  } catch (const Error& e) {
    me.dataset_error = e.what();
  }
}

// ---- judging and printing ------------------------------------------------------------------

enum class Verdict { pass, warn, fail, skip };

struct Check {
  std::string name;
  Verdict verdict = Verdict::pass;
  std::vector<std::string> lines;  // the first is the summary
};

std::string host_list(const std::vector<RankReport>& all, const std::vector<int>& ranks) {
  std::set<std::string> seen;
  std::string out;
  for (int r : ranks) {
    const auto& h = all[static_cast<std::size_t>(r)].info.host;
    if (seen.insert(h).second) out += (out.empty() ? "" : ", ") + h;
  }
  return out;
}

// Messages grouped by text, each with the ranks (and hosts) that reported it.
std::vector<std::string> by_ranks(const std::vector<RankReport>& all,
                                  const std::map<std::string, std::vector<int>>& groups) {
  std::vector<std::string> out;
  for (const auto& [msg, ranks] : groups) {
    const std::string who = ranks.size() == 1 ? "rank " : "ranks ";
    out.push_back(who + backend::format_rank_ranges(ranks) + " (" + host_list(all, ranks) +
                  "): " + msg);
  }
  return out;
}

template <class F>
std::map<std::string, std::vector<int>> group(const std::vector<RankReport>& all, F message) {
  std::map<std::string, std::vector<int>> g;
  for (const auto& r : all) {
    const std::string m = message(r);
    if (!m.empty()) g[m].push_back(r.info.rank);
  }
  return g;
}

Check judge_launch(const std::vector<RankReport>& all, const runtime::Runtime& rt) {
  Check c{"launch", Verdict::pass, {}};
  std::map<std::string, std::vector<int>> errors, warnings;
  for (const auto& r : all) {
    for (const auto& m : r.launch_errors) errors[m].push_back(r.info.rank);
    for (const auto& m : r.launch_warnings) warnings[m].push_back(r.info.rank);
  }
  c.lines.push_back(std::to_string(rt.size()) + " rank(s) on " + std::to_string(rt.num_nodes()) +
                    " host(s); MPI and the launcher's environment " +
                    (errors.empty() ? "agree" : "disagree"));
  for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
  for (const auto& l : by_ranks(all, warnings)) c.lines.push_back("warning: " + l);
  c.verdict = !errors.empty() ? Verdict::fail : !warnings.empty() ? Verdict::warn : Verdict::pass;
  return c;
}

// The same judgement and words as the warning at the start of training (runtime/cpu_binding.hpp).
Check judge_binding(const std::vector<RankReport>& all) {
  Check c{"binding", Verdict::pass, {}};
  std::vector<runtime::RankInfo> table;
  for (const auto& r : all) table.push_back(r.info);
  const auto warnings = runtime::check_binding(table);
  if (warnings.empty()) {
    c.lines.push_back("every rank may use its share of its host's CPUs");
    return c;
  }
  c.verdict = Verdict::warn;
  c.lines.push_back("ranks bound to fewer CPUs than their host gives each rank");
  for (const auto& w : warnings) c.lines.push_back("warning: " + w);
  return c;
}

Check judge_devices(const std::vector<RankReport>& all) {
  Check c{"devices", Verdict::pass, {}};
  const auto errors = group(all, [](const RankReport& r) { return r.device_error; });
  std::vector<backend::DeviceClaim> claims;
  for (const auto& r : all)
    if (r.device_index >= 0)
      claims.push_back({r.info.rank, r.info.host, static_cast<int>(r.device_index), r.device_uuid,
                        r.device_name});
  std::string shared;
  try {
    backend::check_distinct_devices(claims);
  } catch (const Error& e) {
    shared = e.what();
  }
  if (!errors.empty() || !shared.empty()) {
    c.verdict = Verdict::fail;
    c.lines.push_back("ranks without a usable GPU of their own");
    for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
    if (!shared.empty()) c.lines.push_back(shared);
    return c;
  }
  if (claims.empty()) {
    c.verdict = Verdict::skip;
    c.lines.push_back("no rank uses a GPU");
    for (const auto& l :
         by_ranks(all, group(all, [](const RankReport& r) { return r.device_note; })))
      c.lines.push_back(l);
    return c;
  }
  if (claims.size() != all.size()) {
    c.verdict = Verdict::fail;
    c.lines.push_back(
        "some ranks have a GPU and others do not: a job trains on one kind of device");
  } else {
    c.lines.push_back("every rank has a GPU of its own");
  }
  for (const auto& cl : claims)
    c.lines.push_back("rank " + std::to_string(cl.rank) + " (" + cl.host +
                      "): cuda:" + std::to_string(cl.device) + " " + cl.name + " " + cl.uuid);
  return c;
}

Check judge_network(const std::vector<RankReport>& all) {
  Check c{"network", Verdict::pass, {}};
  std::vector<runtime::HostNetwork> hosts;
  std::set<std::string> seen;
  for (const auto& r : all)
    if (seen.insert(r.network.host).second) hosts.push_back(r.network);
  const auto v = runtime::analyze_network(hosts);
  c.verdict = !v.errors.empty()     ? Verdict::fail
              : !v.warnings.empty() ? Verdict::warn
                                    : Verdict::pass;
  if (hosts.size() == 1)
    c.lines.push_back("1 host: ranks communicate through shared memory");
  else if (v.errors.empty())
    c.lines.push_back(std::to_string(hosts.size()) + " hosts sharing subnet(s) " + [&] {
      std::string s;
      for (const auto& x : v.shared_subnets) s += (s.empty() ? "" : ",") + x;
      return s;
    }());
  else
    c.lines.push_back(std::to_string(hosts.size()) + " hosts without a shared subnet");
  for (const auto& e : v.errors) c.lines.push_back(e);
  for (const auto& w : v.warnings) c.lines.push_back("warning: " + w);
  for (const auto& d : v.details) c.lines.push_back(d);
  return c;
}

Check judge_dataset(const std::vector<RankReport>& all, const Config& cfg,
                    const DoctorOptions& options) {
  Check c{"dataset", Verdict::pass, {}};
  if (!options.dataset_configured) {
    c.verdict = Verdict::skip;
    c.lines.push_back("no dataset configured (give --config FILE or --data.root DIR)");
    return c;
  }
  const std::string what =
      cfg.data.dataset == "packed"
          ? "packed files '" + cfg.data.train_file + "' and '" + cfg.data.test_file + "'"
          : cfg.data.dataset + " in '" + cfg.data.root + "'";
  const auto errors = group(all, [](const RankReport& r) { return r.dataset_error; });
  const auto copies = group(all, [](const RankReport& r) { return r.dataset_summary; });
  // Packed: one group of ranks per distinct fingerprint of each file.
  std::vector<std::string> differing;
  std::vector<std::string> fingerprints;
  if (errors.empty() && cfg.data.dataset == "packed") {
    int k = 0;
    for (const auto* file : {&cfg.data.train_file, &cfg.data.test_file}) {
      const auto prints = group(all, [k](const RankReport& r) {
        return r.packed_fingerprints.size() > static_cast<std::size_t>(k)
                   ? r.packed_fingerprints[static_cast<std::size_t>(k)]
                   : std::string();
      });
      ++k;
      if (prints.size() > 1) {
        differing.push_back("'" + *file + "' differs between ranks:");
        for (const auto& l : by_ranks(all, prints)) differing.push_back("  " + l);
      } else if (!prints.empty()) {
        fingerprints.push_back("'" + *file + "': " + prints.begin()->first);
      }
    }
  }
  if (!differing.empty()) {
    c.verdict = Verdict::fail;
    c.lines.push_back(what +
                      ": the ranks see different copies (a host has another version of a file)");
    for (const auto& l : differing) c.lines.push_back(l);
    return c;
  }
  if (!errors.empty()) {
    c.verdict = Verdict::fail;
    c.lines.push_back(what + ": not readable on every rank that reads it");
    for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
  } else if (copies.size() > 1) {
    c.verdict = Verdict::fail;
    c.lines.push_back(what + ": the ranks read different data (a host has another copy)");
  } else {
    c.lines.push_back(what + ": " + (copies.empty() ? std::string("?") : copies.begin()->first) +
                      (cfg.data.distribute == "broadcast"
                           ? " (data.distribute = broadcast: rank 0 reads it for all)"
                           : " (the same on every rank)"));
    for (const auto& l : fingerprints) c.lines.push_back(l);
    return c;
  }
  if (copies.size() > 1 || !errors.empty())
    for (const auto& l : by_ranks(all, copies)) c.lines.push_back(l);
  return c;
}

// The configuration as each rank loaded it (its files may differ from host to host).
Check judge_config(const std::vector<RankReport>& all, const Config& cfg) {
  Check c{"config", Verdict::pass, {}};
  const auto errors = group(all, [](const RankReport& r) { return r.config_error; });
  if (!errors.empty()) {
    c.verdict = Verdict::fail;
    if (errors.size() == 1 && errors.begin()->second.size() == all.size()) {
      c.lines.push_back(errors.begin()->first);  // the same everywhere: said once
      return c;
    }
    c.lines.push_back("not valid on every rank");
    for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
    return c;
  }
  c.lines.push_back(
      (cfg.source.empty() ? std::string("defaults and command line") : cfg.source.string()) +
      ": every key valid, the model fits the data" +
      (cfg.model.preset.empty() ? std::string() : " (model.preset = " + cfg.model.preset + ")"));
  return c;
}

Check judge_collectives(const std::vector<RankReport>& all) {
  Check c{"collectives", Verdict::pass, {}};
  const auto errors = group(all, [](const RankReport& r) { return r.collective_error; });
  if (errors.empty()) {
    c.lines.push_back(
        "allreduce (float, double, int64), non-blocking allreduce, broadcast and "
        "allgather exact on all " +
        std::to_string(all.size()) + " rank(s)");
    return c;
  }
  c.verdict = Verdict::fail;
  c.lines.push_back("wrong results");
  for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
  return c;
}

const char* tag(Verdict v) {
  switch (v) {
    case Verdict::pass:
      return "[PASS]";
    case Verdict::warn:
      return "[WARN]";
    case Verdict::fail:
      return "[FAIL]";
    case Verdict::skip:
      return "[SKIP]";
  }
  return "[????]";
}

}  // namespace

int run_doctor(const Config& cfg, const runtime::Runtime& rt, const DoctorOptions& options,
               std::ostream& out) {
  // The communicator training uses, with its timeout, for every exchange below: a rank that never
  // arrives is named and the job ends instead of hanging.
  comm::MpiComm comm(MPI_COMM_WORLD, comm::comm_options_from_env(cfg.comm.timeout_s));
  // First, as for training: every rank runs `doctor` with the same configuration (a rank started
  // with another command or config would pair its exchanges with the wrong ones).
  check_ranks_agree(comm, cfg.resolved_toml, {{"command", "doctor"}});
  const int threads = configure_threads(cfg.runtime.threads, rt.local_size());
  out << "ddp_train " << DDP_VERSION_STRING << " doctor: " << rt.size() << " rank(s)\n";

  RankReport me;
  me.info = runtime::describe_self(rt, threads, "cpu", cfg.runtime.threads);
  me.config_error = options.config_error;
  for (const auto& p : runtime::check_launch(rt.rank(), rt.size(), rt.launch_env()))
    (p.severity == runtime::LaunchProblem::Severity::error ? me.launch_errors : me.launch_warnings)
        .push_back(p.message);
  const auto [hosts, device_sets] = gather_host_devices(rt, comm);
  examine_device(cfg, rt, hosts, device_sets, me);
  examine_dataset(cfg, rt, options, me);
  me.network.host = rt.host();
  try {
    me.network.interfaces = runtime::list_interfaces();
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp_train doctor (rank %d): %s\n", rt.rank(), e.what());
  }
  me.network.nccl_socket_ifname = env_or_empty("NCCL_SOCKET_IFNAME");
  me.network.mpi_if_include = env_or_empty("OMPI_MCA_btl_tcp_if_include");
  me.network.mpi_if_exclude = env_or_empty("OMPI_MCA_btl_tcp_if_exclude");

  me.collective_error = comm::verify_collectives(comm);

  std::vector<RankReport> all;
  for (const auto& bytes : runtime::allgather_strings(me.encode(), comm))
    all.push_back(RankReport::decode(bytes));

  std::vector<runtime::RankInfo> table;
  for (const auto& r : all) table.push_back(r.info);
  out << "\n" << runtime::format_rank_table(table) << "\nchecks\n";
  const Check devices = judge_devices(all);
  std::vector<Check> checks = {judge_config(all, cfg), judge_launch(all, rt),
                               judge_binding(all),     devices,
                               judge_network(all),     judge_dataset(all, cfg, options),
                               judge_collectives(all)};
  // A GPU job exchanges its gradients over NCCL: check that data plane too when every rank has a
  // GPU of its own (the devices check passed, which every rank knows from the same reports).
  std::unique_ptr<comm::NcclComm> nccl;
  if (devices.verdict == Verdict::pass) {
    comm::NcclCommOptions nopts;
    nopts.comm = comm::comm_options_from_env(cfg.comm.timeout_s);
    NcclCheck result = check_nccl(comm, static_cast<int>(me.device_index), nopts);
    nccl = std::move(result.comm);
    const auto& errors = result.errors;
    Check c{"nccl", errors.empty() ? Verdict::pass : Verdict::fail, {}};
    c.lines.push_back(errors.empty()
                          ? comm::nccl_version() + ": the same collectives exact on all " +
                                std::to_string(all.size()) + " GPU(s)"
                          : comm::nccl_version() + ": wrong results or errors");
    for (const auto& l : by_ranks(all, errors)) c.lines.push_back(l);
    checks.push_back(c);
  }
  int failed = 0, warned = 0;
  for (const auto& c : checks) {
    char head[32];
    std::snprintf(head, sizeof head, "%s %-12s", tag(c.verdict), c.name.c_str());
    out << head << c.lines.front() << "\n";
    for (std::size_t i = 1; i < c.lines.size(); ++i) out << "         " << c.lines[i] << "\n";
    if (c.verdict == Verdict::fail) ++failed;
    if (c.verdict == Verdict::warn) ++warned;
  }

  if (options.sweep && failed == 0) {
    const auto sizes = comm::sweep_sizes(8, options.sweep_max_bytes, 4);
    const auto rows = comm::bandwidth_sweep(comm, sizes, options.sweep_iterations);
    out << "\nall-reduce bandwidth (float sum over MPI, " << rt.size()
        << " rank(s); busbw = algbw * 2(n-1)/n)\n"
        << comm::format_bandwidth_table(rows);
    if (nccl) {
      // Device buffers: NCCL reduces them in place, as it does the gradient buckets.
      const std::size_t bytes =
          std::max(sizes.empty() ? std::size_t{4} : sizes.back(), sizeof(float));
      backend::DeviceBuffer buffer(static_cast<int>(me.device_index), bytes);
      const auto gpu_rows =
          comm::bandwidth_sweep(*nccl, sizes, options.sweep_iterations,
                                std::span<float>(buffer.floats(), bytes / sizeof(float)));
      out << "\nall-reduce bandwidth (float sum over " << comm::nccl_version()
          << ", device buffers, " << rt.size() << " GPU(s); busbw = algbw * 2(n-1)/n)\n"
          << comm::format_bandwidth_table(gpu_rows);
    }
  } else if (options.sweep) {
    out << "\nall-reduce bandwidth: not measured (a check failed)\n";
  }
  // A warning does not fail the launch (exit 0), but "all checks passed" would hide it.
  out << "\ndoctor: "
      << (failed > 0   ? std::to_string(failed) + " check(s) failed"
          : warned > 0 ? "passed with " + std::to_string(warned) + " warning(s) (see [WARN] above)"
                       : std::string("all checks passed"))
      << "\n";
  out.flush();
  return failed == 0 ? 0 : 1;
}

}  // namespace ddp::app
