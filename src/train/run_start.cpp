#include "ddp/train/run_start.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <ostream>
#include <regex>
#include <set>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/train/config_changes.hpp"

namespace ddp::train {
namespace {

namespace fs = std::filesystem;

bool is_run_file(const std::string& name) {
  static const std::regex snapshot(R"(snapshot_e\d+(_s\d+)?\.h5)");
  return name == kRunRecordFile || name == kResolvedConfigFile || name == "metrics.jsonl" ||
         std::regex_match(name, snapshot);
}

std::string list_names(const std::vector<fs::path>& files) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(files.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + files[i].filename().string();
  if (files.size() > shown) out += ", ... (" + std::to_string(files.size()) + " files)";
  return out;
}

std::string describe_record(const RunRecord& r) {
  return "run " + r.run_id + " (" + r.status + ", " + std::to_string(r.epochs_done) + " of " +
         std::to_string(r.epochs) + " epochs)";
}

// The run's files move to dir/archive/<name>/: nothing is deleted, and nothing of the old run
// stays where the new one could mistake it for its own.
void archive(const fs::path& dir, const std::vector<fs::path>& files, const std::string& name,
             std::ostream& out) {
  fs::path to = dir / "archive" / name;
  for (int i = 2; fs::exists(to); ++i) to = dir / "archive" / (name + "-" + std::to_string(i));
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) throw SystemError("cannot create '" + to.string() + "': " + ec.message());
  for (const auto& f : files) {
    fs::rename(f, to / f.filename(), ec);
    if (ec) throw SystemError("cannot move '" + f.string() + "' to '" + to.string() +
                              "': " + ec.message());
  }
  out << "run.overwrite: moved the previous run's " << files.size() << " file(s) ("
      << list_names(files) << ") to " << to.string() << "\n";
}

std::int64_t flat_int(const std::map<std::string, std::string>& flat, const std::string& key,
                      std::int64_t fallback) {
  const auto it = flat.find(key);
  if (it == flat.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

struct Decision {
  RunStart::Action action = RunStart::Action::fresh;
  std::string run_id;
  std::string snapshot;
  std::int64_t global_batch = 0;  // > 0: keep the run's global batch
};

std::string encode(const Decision& d) {
  return std::to_string(static_cast<int>(d.action)) + "\n" + std::to_string(d.global_batch) +
         "\n" + d.run_id + "\n" + d.snapshot;
}

Decision decode(const std::string& s) {
  Decision d;
  std::size_t a = s.find('\n'), b = s.find('\n', a + 1), c = s.find('\n', b + 1);
  d.action = static_cast<RunStart::Action>(std::stoi(s.substr(0, a)));
  d.global_batch = std::stoll(s.substr(a + 1, b - a - 1));
  d.run_id = s.substr(b + 1, c - b - 1);
  d.snapshot = s.substr(c + 1);
  return d;
}

// Compares the snapshot's configuration with this invocation's: refuses what makes the snapshot
// meaningless and, mid-epoch, what moves the sample position; keeps the run's global batch unless
// it is overridden; lists the rest.
void check_resume(const app::Config& cfg, const fs::path& file, const ckpt::SnapshotMeta& meta,
                  std::int64_t world, Decision& d, std::vector<std::string>& changes,
                  std::ostream& out) {
  std::vector<ConfigChange> all;
  try {
    all = config_changes(meta.config_toml, cfg.resolved_toml);
  } catch (const ConfigError& e) {
    throw DataError("snapshot '" + file.string() + "': " + e.what());
  }
  std::vector<std::string> fatal;
  bool batch_given = false;
  for (const auto& c : all) {
    if (is_invocation_key(c.key)) continue;
    if (changes_meaning(c.key)) fatal.push_back(describe(c));
    if (c.key == "train.global_batch" || c.key == "train.batch_size") batch_given = true;
    changes.push_back(describe(c));
  }
  if (!fatal.empty()) {
    std::string list;
    for (const auto& f : fatal) list += "\n  " + f;
    throw ConfigError("cannot resume from '" + file.string() +
                      "': these changes make its weights meaningless for this configuration:" +
                      list +
                      "\nrestore them, or start a new run (another run.dir, or --run.overwrite)");
  }
  const auto old_flat = flatten_config(meta.config_toml);
  std::int64_t run_batch = meta.global_batch;
  if (run_batch <= 0) {  // older snapshots: derive it from their configuration
    run_batch = flat_int(old_flat, "train.global_batch", 0);
    if (run_batch <= 0) run_batch = flat_int(old_flat, "train.batch_size", 0) * meta.world_size;
  }
  const std::int64_t asked =
      cfg.train.global_batch > 0 ? cfg.train.global_batch : cfg.train.batch_size * world;
  std::int64_t batch = asked;
  if (!batch_given && run_batch > 0 && asked != run_batch) {
    batch = run_batch;
    d.global_batch = run_batch;
    out << "resume: global batch kept at " << run_batch << ", the run's (train.batch_size "
        << cfg.train.batch_size << " x " << world << " rank(s) would give " << asked
        << "; --train.global_batch changes it)\n";
  }
  if (meta.position.step_in_epoch > 0) {
    std::vector<std::string> moved;
    for (const auto& c : all)
      if (fixes_sample_position(c.key)) moved.push_back(describe(c));
    if (run_batch > 0 && batch != run_batch)
      moved.push_back("global batch: " + std::to_string(run_batch) + " -> " +
                      std::to_string(batch));
    if (!moved.empty()) {
      std::string list;
      for (const auto& m : moved) list += "\n  " + m;
      throw ConfigError("cannot resume from '" + file.string() + "': it was written in the middle of epoch " +
                        std::to_string(meta.position.epoch + 1) + " (after step " +
                        std::to_string(meta.position.step_in_epoch) +
                        "), and these changes would continue it at another sample position:" +
                        list + "\nrestore them, or resume from an end-of-epoch snapshot");
    }
  }
  if (!changes.empty()) {
    out << "resume: configuration changes since the snapshot (recorded in run.json):\n";
    for (const auto& c : changes) out << "  " << c << "\n";
  }
}

// Rank 0's decision.
Decision decide(const app::Config& cfg, std::int64_t world, std::vector<std::string>& changes,
                std::optional<RunRecord>& record, std::ostream& out) {
  const fs::path dir = cfg.run.dir;
  Decision d;
  record = read_run_record(dir);
  auto files = run_files(dir);
  const std::string& resume = cfg.train.resume;
  if (cfg.run.overwrite) {
    if (!resume.empty())
      throw ConfigError("run.overwrite starts a new run: it cannot be combined with --resume " +
                        resume);
    if (!files.empty())
      archive(dir, files, record ? record->run_id : "unnamed-" + new_run_id(), out);
    record.reset();
    files.clear();
  }
  auto warn = [&](const std::string& w) {
    std::fprintf(stderr, "ddp_train: warning: %s\n", w.c_str());
    out << "warning: " << w << "\n";
  };
  std::optional<fs::path> file;
  if (resume.empty()) {
    if (!files.empty())
      throw ConfigError(
          "run.dir '" + dir.string() + "' already holds " +
          (record ? describe_record(*record) : "another run's files") + ": " + list_names(files) +
          ". Continue it with --resume auto, start over with --run.overwrite (its files move to " +
          (dir / "archive").string() + "/), or choose another run.dir");
    d.run_id = new_run_id();
    return d;
  }
  if (resume == "auto") {
    file = ckpt::find_latest(dir, warn, record ? record->run_id : "");
    if (record && record->status == "complete" && record->epochs_done >= cfg.train.epochs) {
      d.action = RunStart::Action::nothing_to_do;
      d.run_id = record->run_id;
      out << "run.dir " << dir.string() << ": " << describe_record(*record)
          << " is complete: nothing to do, no file was changed (a larger --train.epochs trains "
             "it further)\n";
      return d;
    }
    if (!file) {
      d.run_id = record ? record->run_id : new_run_id();
      out << "resume: no snapshot " << (record ? "of run " + record->run_id + " " : "")
          << "in " << dir.string() << ", starting " << (record ? "it again " : "")
          << "from scratch\n";
      return d;
    }
  } else {
    file = fs::path(resume);
  }
  const ckpt::SnapshotMeta meta = ckpt::read_meta(*file);
  if (record && !meta.run_id.empty() && meta.run_id != record->run_id)
    throw ConfigError("run.dir '" + dir.string() + "' holds " + describe_record(*record) +
                      ", but snapshot '" + file->string() + "' belongs to run " + meta.run_id +
                      ": resume it in its own run.dir, or start over here with --run.overwrite");
  if (!record && resume != "auto" && !files.empty()) {
    // A directory of files without run.json: written by an older version, or by hand.
    out << "resume: " << dir.string() << " holds files of an unnamed run (" << list_names(files)
        << "); continuing into it\n";
  }
  d.run_id = record ? record->run_id : (!meta.run_id.empty() ? meta.run_id : new_run_id());
  if (meta.position.step_in_epoch == 0 && meta.position.epoch >= cfg.train.epochs) {
    d.action = RunStart::Action::nothing_to_do;
    out << "resume: snapshot " << file->string() << " is at epoch " << meta.position.epoch
        << " of train.epochs = " << cfg.train.epochs
        << ": the run is complete, nothing to do, no file was changed (a larger --train.epochs "
           "trains it further)\n";
    return d;
  }
  d.action = RunStart::Action::resume;
  d.snapshot = file->string();
  check_resume(cfg, *file, meta, world, d, changes, out);
  return d;
}

void broadcast_string(comm::Communicator& comm, std::string& s) {
  std::int64_t len = static_cast<std::int64_t>(s.size());
  comm.broadcast(std::as_writable_bytes(std::span<std::int64_t>(&len, 1)), 0);
  s.resize(static_cast<std::size_t>(len));
  comm.broadcast(std::as_writable_bytes(std::span<char>(s.data(), s.size())), 0);
}

}  // namespace

std::vector<fs::path> run_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && is_run_file(entry.path().filename().string()))
      out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

RunStart plan_run_start(const app::Config& cfg, comm::Communicator& comm, std::ostream& out) {
  RunStart start;
  start.config = cfg;
  std::string message;
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      message = encode(decide(cfg, comm.size(), start.changes, start.record, out));
    } catch (const Error&) {
      error = std::current_exception();
      message.clear();
    }
  }
  // The other ranks learn that rank 0 failed instead of waiting for a decision that never comes.
  if (comm.size() > 1) broadcast_string(comm, message);
  if (error) std::rethrow_exception(error);
  if (message.empty()) throw Error("rank 0 could not start the run (see its error)");
  const Decision d = decode(message);
  start.action = d.action;
  start.run_id = d.run_id;
  start.snapshot = d.snapshot;
  start.config.train.resume = d.snapshot;
  if (d.global_batch > 0) start.config.train.global_batch = d.global_batch;
  return start;
}

}  // namespace ddp::train
