// Command-line options for every configuration key, generated from the schema.
#include <CLI/CLI.hpp>

#include "ddp/app/config_schema.hpp"

namespace ddp::app {
namespace {

std::string type_label(ValueType t) {
  switch (t) {
    case ValueType::kInt:
      return "INT";
    case ValueType::kFloat:
      return "FLOAT";
    case ValueType::kBool:
      return "BOOL";
    case ValueType::kString:
      return "TEXT";
    case ValueType::kFloatList:
      return "FLOATS";
  }
  return "VALUE";
}

}  // namespace

void add_config_options(CLI::App& app, Overrides& out) {
  for (const auto& key : config_keys()) {
    std::string names = "--" + std::string(key.name);
    std::string label = type_label(key.type());
    if (key.name == "run.dir") {
      names += ",--run-dir";
      label = "DIR";
    }
    if (key.name == "train.resume") {
      names += ",--resume";
      label = "auto|PATH";
    }
    std::string help(key.help);
    help += " [";
    if (auto allowed = key.constraint_text(); !allowed.empty()) help += allowed + "; ";
    help += "default: " + key.default_text() + "]";

    auto* opt = app.add_option_function<std::string>(
        names,
        [&out, name = std::string(key.name)](const std::string& v) { out.emplace_back(name, v); },
        help);
    // Run the callback as each occurrence is parsed, so `out` keeps the command-line order and a
    // repeated option simply appends again (the last one wins in load_config).
    opt->trigger_on_parse()->type_name(label)->group("[" + std::string(key.section()) +
                                                     "] settings (override the --config file)");
    // A boolean given alone is set: `--run.overwrite` = `--run.overwrite true`.
    if (key.type() == ValueType::kBool) opt->expected(0, 1)->default_str("true");
  }
}

}  // namespace ddp::app
