#pragma once
// `ddp_train eval --snapshot FILE`: the snapshot's exact test-set accuracy and loss over every
// rank, its per-class accuracy, and the confusion matrix as confusion.csv.
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/runtime/runtime.hpp"

namespace ddp::app {

struct EvalCommand {
  std::string snapshot;
  // Where confusion.csv goes; "" = the snapshot's directory (next to the file it describes).
  std::string output_dir;
  std::string dump_logits;  // a CSV of every test sample's logits ("" = none)
};

CLI::App* add_eval_command(CLI::App& app, EvalCommand& cmd);

// Collective: every rank evaluates its shard of `snap` (cmd.snapshot, read once by the caller);
// rank 0 prints and writes the files.
int run_eval(EvalCommand& cmd, Config cfg, const ckpt::Snapshot& snap, runtime::Runtime& rt,
             comm::MpiComm& comm, std::ostream& out);

}  // namespace ddp::app
