#include "ddp/app/compute.hpp"

#include <cstdlib>
#include <iterator>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/backend/device_assign.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/gather.hpp"

namespace ddp::app {

std::string DeviceChoice::device_string() const {
  return index < 0 ? std::string("cpu") : backend::cuda_device_string(index);
}

std::string visible_device_set() {
  std::string set;
  try {
    for (int d = 0, n = backend::cuda_device_count(); d < n; ++d) {
      if (d > 0) set += ',';
      set += backend::cuda_device_info(d).uuid;
    }
  } catch (const Error&) {
    // A GPU that cannot be asked is reported by choose_device; its set is simply unknown here.
  }
  return set;
}

HostDevices gather_host_devices(const runtime::Runtime& rt, comm::Communicator& comm) {
  // One exchange for both (host names hold no newline): start-up costs no extra collective.
  HostDevices out;
  for (const auto& r : runtime::allgather_strings(rt.host() + '\n' + visible_device_set(), comm)) {
    const auto nl = r.find('\n');
    out.hosts.push_back(r.substr(0, nl));
    out.device_sets.push_back(nl == std::string::npos ? std::string() : r.substr(nl + 1));
  }
  return out;
}

namespace {

// The reason's first clause ("no NVIDIA driver was found" of "no NVIDIA driver was found
// (libcuda.so could not be loaded): this machine has ..."): a CPU start under runtime.device =
// auto says why in a few words; runtime.device = cuda, which needs the GPU, gets the whole text.
std::string first_clause(const std::string& why) {
  const auto end = why.find_first_of("(:;");
  std::string out = why.substr(0, end);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? why : out;
}

}  // namespace

DeviceChoice choose_device(const std::string& mode, const runtime::Runtime& rt,
                           const std::vector<std::string>& hosts,
                           const std::vector<std::string>& device_sets) {
  DeviceChoice c;
  if (mode == "cpu") {
    c.note = "runtime.device = cpu";
    return c;
  }
  const int visible = backend::cuda_device_count();
  if (visible == 0) {
    const std::string why = backend::cuda_unavailable_reason();
    if (mode == "cuda")
      c.error = "runtime.device = cuda, but no usable GPU: " + why;
    else
      c.note = "no GPU (" + first_clause(why) + ")";
    return c;
  }
  backend::DeviceRequest req;
  req.host = rt.host();
  req.rank = rt.rank();
  req.local_rank = rt.local_rank();
  req.local_size = rt.local_size();
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] != rt.host()) continue;
    req.host_ranks.push_back(static_cast<int>(r));
    if (r < device_sets.size()) req.host_device_sets.push_back(device_sets[r]);
  }
  // Only a complete list is usable (the local ranks are these hosts' ranks in rank order).
  if (std::ssize(req.host_device_sets) != rt.local_size()) req.host_device_sets.clear();
  req.visible_devices = visible;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) req.cuda_visible_devices = v;
  try {
    const int d = backend::assign_device(req);
    const auto info = backend::cuda_device_info(d);
    c.index = d;
    c.uuid = info.uuid;
    c.name = info.name;
  } catch (const Error& e) {
    c.error = e.what();
  }
  return c;
}

namespace {

// Reduced precision is a GPU feature: a CPU run asked for it is refused, not silently run in fp32.
void check_cpu_precision(const Config& cfg, const std::string& why_cpu) {
  if (cfg.runtime.precision == "fp32") return;
  throw ConfigError("runtime.precision = \"" + cfg.runtime.precision +
                    "\" needs GPUs, but this job trains on the CPU (" + why_cpu +
                    "): use runtime.precision = \"fp32\"");
}

}  // namespace

Compute setup_compute(const Config& cfg, const runtime::Runtime& rt, comm::Communicator& comm) {
  const std::string& mode = cfg.runtime.device;
  Compute out;
  if (mode == "cpu") {
    check_cpu_precision(cfg, "runtime.device = cpu");
    out.backend = backend::make_cpu_backend();
    return out;
  }
  const auto [hosts, device_sets] = gather_host_devices(rt, comm);
  const DeviceChoice me = choose_device(mode, rt, hosts, device_sets);
  runtime::RecordWriter w;
  w.put(std::int64_t{me.index}).put(me.uuid).put(me.name).put(me.error).put(me.note);
  const auto records = runtime::allgather_strings(w.bytes(), comm);

  std::vector<backend::DeviceClaim> claims;
  std::string errors, without;
  for (std::size_t r = 0; r < records.size(); ++r) {
    runtime::RecordReader in(records[r]);
    const auto index = static_cast<int>(in.get_int());
    const std::string uuid = in.get_str(), name = in.get_str(), error = in.get_str();
    const std::string where = "rank " + std::to_string(r) + " (" + hosts[r] + ")";
    if (!error.empty()) errors += "\n  " + where + ": " + error;
    if (index >= 0)
      claims.push_back({static_cast<int>(r), hosts[r], index, uuid, name});
    else
      without += (without.empty() ? "" : ", ") + std::to_string(r);
  }
  // A rank that sees GPUs but cannot have one of its own (more ranks than GPUs on its host) is a
  // launch error under "auto" too: quietly training on the CPU next to idle GPUs is not wanted.
  if (!errors.empty())
    throw ConfigError("runtime.device = \"" + mode + "\": not every rank can have a GPU:" + errors);
  // runtime.device = auto trains on GPUs only when every rank has one.
  const bool gpus = claims.size() == records.size();
  if (!gpus) {
    out.note = claims.empty() ? me.note + ": trains on the CPU"
                              : "runtime.device = auto: rank(s) " + without +
                                    " have no usable GPU, so every rank trains on the CPU";
    check_cpu_precision(cfg,
                        claims.empty() ? me.note : "rank(s) " + without + " have no usable GPU");
    out.backend = backend::make_cpu_backend();
    return out;
  }
  backend::check_distinct_devices(claims);  // the same verdict on every rank

  backend::CudaOptions options;
  options.precision = cfg.runtime.precision == "bf16"   ? backend::Precision::bf16
                      : cfg.runtime.precision == "fp16" ? backend::Precision::fp16
                                                        : backend::Precision::fp32;
  auto be = backend::make_cuda_backend(me.index, options);
  out.device = me.device_string();
  out.note = "GPU " + out.device + " " + me.name + " (cuDNN convolution algorithms " +
             (options.benchmark ? "timed once per shape" : "by heuristics") +
             (options.deterministic ? ", deterministic ones first" : "") + "; batch norm on " +
             (options.cudnn_batch_norm ? "cuDNN" : "the backend's own kernels") + ")";
  if (rt.size() > 1) {
    comm::NcclCommOptions o;
    o.comm = comm::comm_options_from_env(cfg.comm.timeout_s);
    out.grad_comm = comm::make_nccl_comm(MPI_COMM_WORLD, me.index, be->compute_stream(), o);
  }
  out.backend = std::move(be);
  return out;
}

}  // namespace ddp::app
