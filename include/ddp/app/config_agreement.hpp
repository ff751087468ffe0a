#pragma once
// Every rank must run the same configuration: an MPMD launch (`mpirun -np 1 ddp_train A : -np 1
// ddp_train B`) or a per-host config file can give ranks different batch sizes, models or seeds,
// which crash in a collective or, worse, train and evaluate on the wrong samples without a word.
// At start every rank hashes its resolved configuration; when the hashes differ, the ranks
// exchange the configurations themselves and rank 0 reports each differing key with its value per
// rank.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/error.hpp"

namespace ddp::app {

// Keys each rank may set for itself; see the definition for why each one is harmless.
const std::vector<std::string_view>& per_rank_keys();

// The resolved configuration (Config::resolved_toml) as "key = value" lines in document order,
// layers as model.layers[I].key, without per_rank_keys(), followed by `extra` (what else must
// agree, e.g. the subcommand). The text whose hash the ranks compare.
std::string agreement_text(const std::string& resolved_toml,
                           const std::vector<std::pair<std::string, std::string>>& extra = {});

// 64-bit FNV-1a (the same on every host and build, unlike std::hash).
std::uint64_t agreement_hash(std::string_view text);

// One key whose value is not the same on every rank.
struct KeyDifference {
  std::string key;
  std::vector<std::string> values;  // per rank (index = rank); "(not set)" where a rank lacks it
};

// The keys whose values differ between the ranks' agreement texts (index = rank), in the order
// they first appear.
std::vector<KeyDifference> differing_keys(const std::vector<std::string>& texts);

// The error text: one line per differing key, its values grouped by the ranks holding them
// ("  train.batch_size: 64 on ranks 0-2; 32 on rank 3"), at most `max_keys` keys.
std::string describe_differences(const std::vector<KeyDifference>& diffs,
                                 std::size_t max_keys = 20);

// Thrown on every rank when the configurations differ. Every rank knows it (the hashes are
// exchanged), so nobody needs to abort the others: rank 0 prints the message (report() is true
// there) and every rank exits non-zero.
class RanksDisagree : public ConfigError {
 public:
  RanksDisagree(const std::string& what, bool report) : ConfigError(what), report_(report) {}
  bool report() const { return report_; }

 private:
  bool report_;
};

// Collective over `comm` (under its timeout): returns when every rank's agreement_text(...) is the
// same, throws RanksDisagree otherwise.
void check_ranks_agree(comm::Communicator& comm, const std::string& resolved_toml,
                       const std::vector<std::pair<std::string, std::string>>& extra = {});

}  // namespace ddp::app
