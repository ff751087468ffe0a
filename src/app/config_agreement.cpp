// The ranks' configurations must agree: hash, exchange on mismatch, report each differing key.
#include "ddp/app/config_agreement.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <span>

#include "ddp/app/config_detail.hpp"
#include "ddp/runtime/gather.hpp"
#include "ddp/runtime/rank_info.hpp"

namespace ddp::app {
namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;

// "key = value" lines of a TOML document: tables recurse with dotted names, arrays of tables with
// [index], anything else is a value (as TOML text, so strings stay quoted and escaped).
void flatten(const toml::table& table, const std::string& prefix, Lines& out) {
  for (auto&& [k, node] : table) {
    const std::string name =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* t = node.as_table()) {
      flatten(*t, name, out);
      continue;
    }
    if (const auto* a = node.as_array(); a && a->is_array_of_tables()) {
      for (std::size_t i = 0; i < a->size(); ++i)
        flatten(*a->get(i)->as_table(), name + "[" + std::to_string(i) + "]", out);
      continue;
    }
    out.emplace_back(name, detail::node_text(node));
  }
}

Lines parse_lines(const std::string& text) {
  Lines out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const auto eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    out.emplace_back(line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + runtime::format_cpu_list(ranks);
}

}  // namespace

const std::vector<std::string_view>& per_rank_keys() {
  static const std::vector<std::string_view> keys = {
      // Compute threads: the cores differ from host to host, and the result does not depend on
      // them (every rank applies the same all-reduced gradient).
      "runtime.threads",
      // Where the dataset is mounted can differ per host (a node-local copy under /tmp or a
      // scratch disk). What is read from there is pinned by data.dataset and the limits, which
      // are compared.
      "data.root",
      // How long this rank waits for the others: its own patience, harmless when it differs.
      "comm.timeout_s",
  };
  return keys;
}

std::string agreement_text(const std::string& resolved_toml, const Lines& extra) {
  toml::table root;
  try {
    root = toml::parse(resolved_toml);
  } catch (const toml::parse_error& e) {
    throw Error("internal: the resolved configuration does not parse: " +
                std::string(e.description()));
  }
  Lines lines;
  flatten(root, "", lines);
  std::string out;
  const auto& skip = per_rank_keys();
  for (const auto& [key, value] : lines) {
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    out += key + " = " + value + "\n";
  }
  for (const auto& [key, value] : extra) out += key + " = " + value + "\n";
  return out;
}

std::uint64_t agreement_hash(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<KeyDifference> differing_keys(const std::vector<std::string>& texts) {
  std::vector<std::string> order;  // keys by first appearance
  std::vector<std::map<std::string, std::string>> values(texts.size());
  for (std::size_t r = 0; r < texts.size(); ++r) {
    for (auto& [key, value] : parse_lines(texts[r])) {
      if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
      values[r][key] = value;
    }
  }
  std::vector<KeyDifference> out;
  for (const auto& key : order) {
    KeyDifference d{key, {}};
    for (const auto& v : values) {
      const auto it = v.find(key);
      d.values.push_back(it == v.end() ? "(not set)" : it->second);
    }
    if (std::adjacent_find(d.values.begin(), d.values.end(), std::not_equal_to<>()) !=
        d.values.end())
      out.push_back(std::move(d));
  }
  return out;
}

std::string describe_differences(const std::vector<KeyDifference>& diffs, std::size_t max_keys) {
  std::string out;
  for (std::size_t i = 0; i < diffs.size() && i < max_keys; ++i) {
    // Values in order of the lowest rank holding them.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t r = 0; r < diffs[i].values.size(); ++r) {
      const auto& v = diffs[i].values[r];
      auto it =
          std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
      if (it == groups.end()) it = groups.insert(groups.end(), {v, {}});
      it->second.push_back(static_cast<int>(r));
    }
    out += "\n  " + diffs[i].key + ":";
    for (std::size_t g = 0; g < groups.size(); ++g)
      out += (g ? "; " : " ") + groups[g].first + " on " + ranks_text(groups[g].second);
  }
  if (diffs.size() > max_keys)
    out += "\n  ... and " + std::to_string(diffs.size() - max_keys) + " more key(s)";
  return out;
}

void check_ranks_agree(comm::Communicator& comm, const std::string& resolved_toml,
                       const Lines& extra) {
  if (comm.size() == 1) return;
  const std::string text = agreement_text(resolved_toml, extra);
  const std::uint64_t mine = agreement_hash(text);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(hashes)));
  if (std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; }))
    return;
  // Every rank saw the same hashes, so every rank takes part in this second exchange.
  const auto texts = runtime::allgather_strings(text, comm);
  const auto diffs = differing_keys(texts);
  std::string message =
      "the ranks were started with different configurations; every rank must run the same one "
      "(only ";
  const auto& free = per_rank_keys();
  for (std::size_t i = 0; i < free.size(); ++i)
    message += std::string(i ? (i + 1 == free.size() ? " and " : ", ") : "") + std::string(free[i]);
  message += " may differ):";
  message += diffs.empty() ? "\n  (the texts differ, but no single key does)"
                           : describe_differences(diffs);
  throw RanksDisagree(message, comm.rank() == 0);
}

}  // namespace ddp::app
