// Command-line options for every configuration key, generated from the schema, and what is said
// about arguments that match none.
#include <CLI/CLI.hpp>
#include <cctype>

#include "ddp/app/config_detail.hpp"
#include "ddp/app/config_schema.hpp"

namespace ddp::app {
namespace {

// "--name" for every long option of `app` and of all its subcommands.
void long_options(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* opt : app.get_options())
    for (const auto& name : opt->get_lnames()) out.push_back("--" + name);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    long_options(*sub, out);
}

// "; did you mean '--train.epochs'?" for an unknown "--name": the configuration key the config
// file would suggest for the same typo, else the nearest other option.
std::string option_hint(const std::string& name, const std::vector<std::string>& options) {
  if (auto key = detail::nearest_key(name)) return "; did you mean '--" + *key + "'?";
  return detail::did_you_mean("--" + name, options);
}

}  // namespace

std::string unexpected_arguments(const std::vector<std::string>& extras, const CLI::App& app) {
  std::vector<std::string> options, commands;
  long_options(app, options);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(sub->get_name());
  std::string out;
  bool after_option = false;  // a word right after an unknown option is taken for its value
  for (const auto& arg : extras) {
    std::string line;
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      const std::string name = arg.substr(2, arg.find('=') - 2);
      line = "unknown option '--" + name + "'" + option_hint(name, options);
      after_option = arg.find('=') == std::string::npos;
    } else if (arg.size() > 1 && arg[0] == '-' &&
               !std::isdigit(static_cast<unsigned char>(arg[1]))) {
      line = "unknown option '" + arg + "'";
      after_option = true;
    } else if (after_option) {
      after_option = false;
      continue;
    } else {
      line = "unexpected argument '" + arg + "'" + detail::did_you_mean(arg, commands);
    }
    out += (out.empty() ? "" : "\n  ") + line;
  }
  return "command line: " + out + " (ddp_train --help lists the options)";
}

void add_config_options(CLI::App& app, Overrides& out) {
  for (const auto& key : config_keys()) {
    std::string names = "--" + std::string(key.name);
    std::string label = detail::type_label(key.type());
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
    // A boolean given alone is set: `--run.overwrite` = `--run.overwrite true`. Shown as
    // "[BOOL]" (option_text replaces CLI11's "BOOL=true", which read as the default).
    if (key.type() == ValueType::kBool)
      opt->expected(0, 1)->default_str("true")->option_text("[BOOL]");
  }
}

}  // namespace ddp::app
