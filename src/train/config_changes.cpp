#include "ddp/train/config_changes.hpp"

#include <toml++/toml.h>

#include <charconv>
#include <set>
#include <sstream>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

std::string value_text(const toml::node& node) {
  std::ostringstream out;
  if (const auto* s = node.as_string()) {
    out << '"' << s->get() << '"';  // plain: the quotes only tell strings from numbers
  } else if (const auto* f = node.as_floating_point()) {
    // The shortest text that reads back as the same double: "0.1", not "0.10000000000000001".
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f->get());
    out << (ec == std::errc() ? std::string(buf, end) : std::string("?"));
  } else if (const auto* list = node.as_array(); list && !list->is_array_of_tables()) {
    out << "[";
    for (std::size_t i = 0; i < list->size(); ++i)
      out << (i ? ", " : "") << value_text(*list->get(i));
    out << "]";
  } else if (const auto* t = node.as_table())
    out << toml::toml_formatter(*t, toml::format_flags::none);
  else if (const auto* a = node.as_array())
    out << toml::toml_formatter(*a, toml::format_flags::none);
  else
    node.visit([&](const auto& v) {
      if constexpr (toml::is_value<decltype(v)>) out << v;
    });
  return out.str();
}

}  // namespace

std::map<std::string, std::string> flatten_config(const std::string& toml_text) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(toml_text), std::string_view("resolved configuration"));
  } catch (const toml::parse_error& e) {
    throw ConfigError("the stored configuration is not TOML: " + std::string(e.description()));
  }
  std::map<std::string, std::string> out;
  for (const auto& [section, node] : root) {
    const std::string s(section.str());
    if (const auto* table = node.as_table()) {
      for (const auto& [key, value] : *table)
        out[s + "." + std::string(key.str())] = value_text(value);
    } else {
      out[s] = value_text(node);
    }
  }
  return out;
}

std::string with_int_value(const std::string& toml_text, const std::string& key,
                           std::int64_t value) {
  toml::table root = toml::parse(std::string_view(toml_text), std::string_view("configuration"));
  const auto dot = key.find('.');
  const std::string section = key.substr(0, dot), leaf = key.substr(dot + 1);
  if (!root.contains(section)) root.insert(section, toml::table{});
  root[section].as_table()->insert_or_assign(leaf, value);
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

std::vector<ConfigChange> config_changes(const std::string& before_toml,
                                         const std::string& after_toml) {
  const auto a = flatten_config(before_toml), b = flatten_config(after_toml);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<ConfigChange> out;
  for (const auto& k : keys) {
    const auto ia = a.find(k), ib = b.find(k);
    const std::string va = ia == a.end() ? "(absent)" : ia->second;
    const std::string vb = ib == b.end() ? "(absent)" : ib->second;
    if (va != vb) out.push_back({k, va, vb});
  }
  return out;
}

std::string describe(const ConfigChange& c) {
  auto shorten = [](const std::string& v) {
    constexpr std::size_t kMax = 60;
    std::string one_line = v;
    for (char& ch : one_line)
      if (ch == '\n') ch = ' ';
    return one_line.size() <= kMax ? one_line : one_line.substr(0, kMax) + "...";
  };
  return c.key + ": " + shorten(c.before) + " -> " + shorten(c.after);
}

bool is_invocation_key(const std::string& key) {
  static const std::set<std::string> keys = {
      "train.resume", "run.overwrite", "run.dir", "data.root", "data.prefetch", "data.distribute",
      "runtime.threads", "runtime.device", "comm.timeout_s", "comm.bucket_mb",
      "comm.first_bucket_mb", "comm.overlap",
      // what the run reports, not what it trains
      "run.tensorboard", "run.trace", "run.log_every", "run.verbose"};
  return keys.count(key) > 0;
}

bool changes_meaning(const std::string& key) {
  // model.sync_batchnorm changes how batches are normalised, not what the weights are.
  return (key.rfind("model.", 0) == 0 && key != "model.sync_batchnorm") || key == "data.dataset" ||
         key == "optim.name";
}

bool fixes_sample_position(const std::string& key) {
  static const std::set<std::string> keys = {"train.seed", "data.train_limit", "train.shuffle",
                                             "train.drop_last", "data.limit_subset"};
  return keys.count(key) > 0;
}

}  // namespace ddp::train
