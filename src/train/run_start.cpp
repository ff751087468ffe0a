#include "ddp/train/run_start.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <ostream>
#include <regex>
#include <set>

#include "ddp/ckpt/init_weights.hpp"
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
// `what` says whose files they are, for the line that lists them.
void archive(const fs::path& dir, const std::vector<fs::path>& files, const std::string& name,
             std::ostream& out,
             const std::string& what = "run.overwrite: moved the previous run's") {
  fs::path to = dir / "archive" / name;
  for (int i = 2; fs::exists(to); ++i) to = dir / "archive" / (name + "-" + std::to_string(i));
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) throw SystemError("cannot create '" + to.string() + "': " + ec.message());
  for (const auto& f : files) {
    fs::rename(f, to / f.filename(), ec);
    if (ec)
      throw SystemError("cannot move '" + f.string() + "' to '" + to.string() +
                        "': " + ec.message());
  }
  out << what << " " << files.size() << " file(s) (" << list_names(files) << ") to " << to.string()
      << "\n";
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
  return std::to_string(static_cast<int>(d.action)) + "\n" + std::to_string(d.global_batch) + "\n" +
         d.run_id + "\n" + d.snapshot;
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
void check_resume(const Setup& cfg, const fs::path& file, const ckpt::SnapshotMeta& meta,
                  std::int64_t world, Decision& d, std::vector<std::string>& changes,
                  std::ostream& out) {
  std::vector<ConfigChange> all;
  try {
    all = config_changes(meta.config_toml, cfg.resolved_toml);
  } catch (const ConfigError& e) {
    throw DataError("snapshot '" + file.string() + "': " + e.what());
  }
  std::vector<std::string> fatal;
  // The global batch is overridden explicitly by a train.global_batch of its own, or by another
  // train.batch_size without one; train.global_batch = 0 ("derive it") keeps the run's, which an
  // earlier resume may have written into the snapshot's configuration.
  bool batch_given = false;
  for (const auto& c : all) {
    if (is_invocation_key(c.key)) continue;
    if (changes_meaning(c.key)) fatal.push_back(describe(c));
    if (c.key == "train.global_batch" && cfg.train.global_batch == 0) continue;
    if ((c.key == "train.global_batch") ||
        (c.key == "train.batch_size" && cfg.train.global_batch == 0))
      batch_given = true;
    changes.push_back(describe(c));
  }
  if (!fatal.empty()) {
    std::string list;
    for (const auto& f : fatal) list += "\n  " + f;
    throw ConfigError(
        "cannot resume from '" + file.string() +
        "': these changes make its weights meaningless for this configuration:" + list +
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
  if (meta.world_size != world)
    changes.push_back("world size: " + std::to_string(meta.world_size) + " -> " +
                      std::to_string(world));
  if (!batch_given && run_batch > 0 && asked != run_batch) {
    batch = run_batch;
    d.global_batch = run_batch;
    changes.push_back("train.global_batch: kept at " + std::to_string(run_batch) +
                      ", the run's (train.batch_size x ranks would give " + std::to_string(asked) +
                      ")");
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
      throw ConfigError(
          "cannot resume from '" + file.string() + "': it was written in the middle of epoch " +
          std::to_string(meta.position.epoch + 1) + " (after step " +
          std::to_string(meta.position.step_in_epoch) +
          "), and these changes would continue it at another sample position:" + list +
          "\nrestore them, or resume from an end-of-epoch snapshot");
    }
  }
  if (!changes.empty()) {
    out << "resume: configuration changes since the snapshot (recorded in run.json):\n";
    for (const auto& c : changes) out << "  " << c << "\n";
  }
}

bool in_dir(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  return fs::equivalent(file.has_parent_path() ? file.parent_path() : ".", dir, ec);
}

// The snapshot a run started from when it has none of its own yet (it continued a file of an
// older program or of another directory): "" when it started from scratch.
std::string origin_of(const RunRecord& r) {
  for (const auto& s : r.segments)
    if (!s.resumed_from.empty()) return s.resumed_from;
  return "";
}

// Resuming from an older snapshot than the run's newest rolls the run back: its later snapshots
// move to the archive, or `--resume auto` would later prefer them over the new branch.
void archive_later_snapshots(const fs::path& dir, const std::string& run_id,
                             const ckpt::TrainingPosition& from, std::ostream& out) {
  std::vector<fs::path> later;
  for (const auto& f : run_files(dir)) {
    const auto h = ckpt::peek_header(f);
    if (h && h->run_id == run_id && h->position > from) later.push_back(f);
  }
  if (later.empty()) return;
  out << "resume: rolling run " << run_id << " back to epoch " << from.epoch << " step "
      << from.step_in_epoch << "; ";
  archive(
      dir, later,
      run_id + "-after-e" + std::to_string(from.epoch) + "s" + std::to_string(from.step_in_epoch),
      out);
}

// Snapshot files in dir that this run did not write: unreadable ones (which --resume auto skipped)
// and other runs' (found by their headers). A run never writes over a file that is not its own:
// they move to the archive before its first snapshot could take one of their names. `keep`: the
// snapshot the run continues from (and the one it started from), wherever it came from.
// `every`: a run starting from scratch archives every snapshot file, its own unreadable ones too.
void archive_foreign_snapshots(const fs::path& dir, const std::string& run_id,
                               const std::vector<fs::path>& keep, std::ostream& out,
                               bool every = false) {
  std::vector<fs::path> foreign;
  for (const auto& f : run_files(dir)) {
    const std::string name = f.filename().string();
    if (name == kRunRecordFile || name == kResolvedConfigFile || name == "metrics.jsonl") continue;
    if (std::any_of(keep.begin(), keep.end(), [&](const fs::path& k) {
          std::error_code ec;
          return fs::equivalent(f, k, ec);
        }))
      continue;
    const auto h = every ? std::nullopt : ckpt::peek_header(f);
    if (!h || h->run_id != run_id) foreign.push_back(f);
  }
  if (foreign.empty()) return;
  archive(dir, foreign, "not-" + run_id + "-" + new_run_id(), out,
          "run " + run_id +
              ": so that none of its snapshots replaces a file it did not write "
              "(unreadable, or another run's), moved");
}

// flock on run.dir/.ddp_train.lock, released by the kernel when the process ends however it ends
// (no stale lock after a kill). The file says who holds it.
std::shared_ptr<void> lock_run_dir(const fs::path& dir, std::ostream& out) {
  const fs::path path = dir / ".ddp_train.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("cannot create '" + path.string() + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {  // a file system without locks: say so, go on
      out << "warning: run.dir " << dir.string() << " cannot be locked (" << std::strerror(err)
          << "): nothing stops a second job from writing into it\n";
      ::close(fd);
      return nullptr;
    }
    char holder[256] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    throw ConfigError("run.dir '" + dir.string() + "' is in use by another ddp_train job (" +
                      (who.empty() ? std::string("holder unknown") : who) +
                      "): two jobs would mix their files; wait for it to end, or use another "
                      "run.dir");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return std::shared_ptr<void>(new int(fd), [](void* p) {
    const int* f = static_cast<int*>(p);
    ::close(*f);  // releases the lock
    delete f;
  });
}

// Rank 0's decision.
Decision decide(const Setup& cfg, std::int64_t world, std::vector<std::string>& changes,
                std::optional<RunRecord>& record, std::ostream& out) {
  const fs::path dir = cfg.run.dir;
  Decision d;
  const std::string& resume = cfg.train.resume;
  if (cfg.run.overwrite && !resume.empty())
    throw ConfigError("run.overwrite starts a new run: it cannot be combined with --resume " +
                      resume);
  std::string unreadable_record;
  try {
    record = read_run_record(dir);
  } catch (const DataError& e) {
    // --run.overwrite must get the user out of a broken run.json whatever it holds (garbage, a
    // truncated file, wrong types, a directory): it moves to the archive with the rest.
    if (!cfg.run.overwrite) throw;
    unreadable_record = e.what();
  }
  auto files = run_files(dir);
  if (cfg.run.overwrite) {
    // The run's files that are not regular files (a directory named run.json) go too: the new
    // run could not write its own otherwise.
    for (const char* name : {kRunRecordFile, kResolvedConfigFile, "metrics.jsonl"}) {
      std::error_code ec;
      const auto st = fs::symlink_status(dir / name, ec);
      if (!ec && fs::exists(st) && !fs::is_regular_file(st)) files.push_back(dir / name);
    }
    // The outputs of run.tensorboard, run.trace, the rank logs and the model table go with the run
    // they describe.
    for (const char* name : {"tensorboard", "trace", "logs", "trace.json", "model.txt"})
      if (!files.empty() && fs::exists(dir / name)) files.push_back(dir / name);
    if (!unreadable_record.empty())
      out << "run.overwrite: run.json cannot be read (" << unreadable_record
          << "); it is archived with the run's other files\n";
    if (!files.empty())
      archive(dir, files, record ? record->run_id : "unnamed-" + new_run_id(), out);
    record.reset();
    files.clear();
  }
  auto warn = [&](const std::string& w) {
    std::fprintf(stderr, "ddp_train: warning: %s\n", w.c_str());
    out << "warning: " << w << "\n";
  };
  const std::string holds = "run.dir '" + dir.string() + "' already holds " +
                            (record ? describe_record(*record) : "another run's files") + ": " +
                            list_names(files);
  std::optional<fs::path> file;
  if (resume.empty()) {
    if (!files.empty())
      throw ConfigError(holds +
                        ". Continue it with --resume auto, start over with --run.overwrite (its "
                        "files move to " +
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
    if (!file && record && !origin_of(*record).empty()) {
      // No snapshot of its own yet: it goes on from the file it started from, never from scratch.
      file = fs::path(origin_of(*record));
      out << "resume: run " << record->run_id << " has no snapshot of its own yet; continuing "
          << "from the snapshot it started from, " << file->string() << "\n";
    }
    if (!file) {
      d.run_id = record ? record->run_id : new_run_id();
      out << "resume: no snapshot " << (record ? "of run " + record->run_id + " " : "") << "in "
          << dir.string() << ", starting " << (record ? "it again " : "") << "from scratch\n";
      // Without run.json the directory's other files (metrics.jsonl, config.toml) are not this
      // run's either.
      if (!record && !files.empty())
        archive(dir, files, "unnamed-" + new_run_id(), out,
                "resume: a new run starts here; moved the files it did not write,");
      else
        archive_foreign_snapshots(dir, d.run_id, {}, out, true);
      return d;
    }
  } else {
    file = fs::path(resume);
  }
  const ckpt::SnapshotMeta meta = ckpt::read_meta(*file);
  if (meta.kind == ckpt::kWeightsKind)
    throw ConfigError(ckpt::weights_file_not_resumable(file->string(), meta));
  const bool origin = record && file->string() == origin_of(*record);
  if (record && !origin && meta.run_id != record->run_id)
    throw ConfigError(
        holds + ", but snapshot '" + file->string() + "' belongs to " +
        (meta.run_id.empty() ? "no run (an older program wrote it)" : "run " + meta.run_id) +
        ": resume it in another run.dir, or start over here with --run.overwrite");
  if (!record && !files.empty()) {
    // Files without run.json: an older version's run. Only its own snapshots continue it.
    if (!in_dir(*file, dir))
      throw ConfigError(holds + ", and snapshot '" + file->string() +
                        "' is not one of them: resume it in another run.dir, or start over here "
                        "with --run.overwrite");
    out << "resume: " << dir.string() << " holds the files of a run without run.json (an older "
        << "version's): continuing it as a named run\n";
  }
  d.run_id = record ? record->run_id : (is_valid_run_id(meta.run_id) ? meta.run_id : new_run_id());
  const auto& p = meta.position;
  if (p.step_in_epoch == 0 && p.epoch >= cfg.train.epochs) {
    d.action = RunStart::Action::nothing_to_do;
    out << "resume: snapshot " << file->string() << " is at epoch " << p.epoch
        << " of train.epochs = " << cfg.train.epochs
        << ": the run is complete, nothing to do (a larger --train.epochs trains it further)\n";
    // A run killed after its final snapshot: close its record (the summary went out before it).
    if (record && record->status != "complete" && p.epoch >= record->epochs) {
      for (auto& s : record->segments)
        if (s.exit == "running") s.exit = "ended without a word (killed, or its node failed)";
      record->status = "complete";
      record->epochs_done = p.epoch;
      write_run_record(dir, *record);
    }
    return d;
  }
  if (p.step_in_epoch > 0 && p.epoch + 1 > cfg.train.epochs)
    throw ConfigError("snapshot '" + file->string() + "' was written in epoch " +
                      std::to_string(p.epoch + 1) + " (after step " +
                      std::to_string(p.step_in_epoch) +
                      "), but train.epochs = " + std::to_string(cfg.train.epochs) +
                      ": ask for at least " + std::to_string(p.epoch + 1) + " epochs to finish it");
  d.action = RunStart::Action::resume;
  d.snapshot = file->string();
  check_resume(cfg, *file, meta, world, d, changes, out);
  if (record && !origin) archive_later_snapshots(dir, record->run_id, p, out);
  std::vector<fs::path> keep = {*file};
  if (record && !origin_of(*record).empty()) keep.emplace_back(origin_of(*record));
  archive_foreign_snapshots(dir, d.run_id, keep, out);
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

RunStart plan_run_start(const Setup& cfg, comm::Communicator& comm, std::ostream& out) {
  RunStart start;
  start.config = cfg;
  std::string message;
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      ckpt::ensure_writable_dir(cfg.run.dir);
      start.lock = lock_run_dir(cfg.run.dir, out);
      message = encode(decide(cfg, comm.size(), start.changes, start.record, out));
    } catch (const Error&) {
      error = std::current_exception();
      message.clear();
    }
  }
  // The other ranks learn that rank 0 failed instead of waiting for a decision that never comes.
  if (comm.size() > 1) broadcast_string(comm, message);
  if (error) std::rethrow_exception(error);
  if (message.empty())
    throw RunStartFailedOnRank0("rank 0 could not start the run (see its error)");
  const Decision d = decode(message);
  start.action = d.action;
  start.run_id = d.run_id;
  start.snapshot = d.snapshot;
  start.config.train.resume = d.snapshot;
  if (d.global_batch > 0) {
    start.config.train.global_batch = d.global_batch;
    // config.toml and the snapshots keep what the run really uses.
    start.config.resolved_toml =
        with_int_value(start.config.resolved_toml, "train.global_batch", d.global_batch);
  }
  return start;
}

}  // namespace ddp::train
