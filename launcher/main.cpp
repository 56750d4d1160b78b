// polyhal: the launcher. Parses the command line, then hands off to commands.cpp.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "polyhal/abi.hpp"
#include "polyhal/error.hpp"
#include "polyhal/op_schema.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage = R"(usage: polyhal [--version] [--log-level LEVEL] <command> [options]

commands:
  plugins   [--plugin-path DIR]...                 discovered plugins, and why any was not loaded
  devices   [--backend NAME] [--set device.OPTION=value]...  devices and their properties
  run       --config FILE [--backend NAME] [--set key.path=value]...
            [--compile-only] [--metrics-out FILE]  run the workload a config describes
  validate  --config FILE [--set key.path=value]...  check a config, run nothing
  pack      --input FILE_OR_DIR --output DIR [--max-seq-len 512] [--algorithm spfhp|nnlshp]
            [--max-sequences-per-pack 3] [--rows-per-file 16384]
                                                   pack MLPerf HDF5 pre-training data
  prepare-data --input FILE_OR_DIR... --vocab vocab.txt --output DIR [--max-seq-len 128]
            [--max-predictions 20] [--masked-lm-prob 0.15] [--dupe-factor 10]
            [--short-seq-prob 0.1] [--whole-word-masking] [--lower-case | --cased]
            [--special-tokens split|keep] [--seed 12345] [--shards 1] [--threads 0]
            [--pack spfhp|nnlshp [--max-sequences-per-pack 3]]
                                                   text to MLPerf HDF5, as BERT's
                                                   create_pretraining_data.py

exit codes: 0 ok, 1 failure while running, 2 bad usage or config, 3 plugin or device unavailable,
            4 a replica was lost (an MPI rank died or a collective timed out)
)";

std::filesystem::path executable_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : self.parent_path();
}

int dispatch(int argc, char** argv) {
  po::options_description options("options");
  std::string command;
  std::string log_level = "info";
  polyhal::launcher::CommonOptions common;
  polyhal::launcher::RunOptions run;
  std::string backend;
  std::vector<std::string> plugin_paths;
  std::string config;
  std::string metrics_out;
  polyhal::PackOptions pack;
  polyhal::PrepareDataOptions prepare;
  std::vector<std::string> inputs;
  std::string vocab, special_tokens = "split", pack_after;
  bool cased = false, lower_case = false;
  options.add_options()("help,h", "show usage")("version", "print version and plugin ABI")(
      "log-level", po::value(&log_level), "trace, debug, info, warn, error, off")(
      "command", po::value(&command), "plugins | devices | run | validate | pack")(
      "plugin-path", po::value(&plugin_paths)->composing(),
      "search this directory for plugins first (repeatable)")(
      "allow-world-writable-plugins", po::bool_switch(&common.allow_world_writable_plugins),
      "load plugins from world-writable directories (unsafe)")(
      "backend", po::value(&backend), "backend name (overrides the config's 'backend')")(
      "config", po::value(&config), "YAML config file")(
      "set", po::value(&run.overrides)->composing(),
      "override a config key: key.path=value (repeatable)")(
      "compile-only", po::bool_switch(&run.compile_only), "prepare and report memory; run nothing")(
      "metrics-out", po::value(&metrics_out), "write JSON-lines metrics to FILE")(
      "input", po::value(&inputs)->composing(),
      "pack: MLPerf HDF5 file or directory; prepare-data: text files or directories")(
      "output", po::value(&pack.output), "pack: output directory")(
      "max-seq-len", po::value(&pack.max_seq_len), "pack: tokens per packed row")(
      "algorithm", po::value(&pack.algorithm), "pack: spfhp | nnlshp")(
      "max-sequences-per-pack", po::value(&pack.max_sequences_per_pack),
      "pack: sequences per row at most")("rows-per-file", po::value(&pack.rows_per_file),
                                         "pack: packed rows per output file")(
      "vocab", po::value(&vocab), "prepare-data: BERT vocab.txt")(
      "max-predictions", po::value(&prepare.max_predictions),
      "prepare-data: masked tokens per sequence at most")(
      "masked-lm-prob", po::value(&prepare.masked_lm_prob), "prepare-data: share of tokens masked")(
      "dupe-factor", po::value(&prepare.dupe_factor),
      "prepare-data: passes over the documents, each masked anew")(
      "short-seq-prob", po::value(&prepare.short_seq_prob),
      "prepare-data: share of instances with a shorter target length")(
      "whole-word-masking", po::bool_switch(&prepare.whole_word_masking),
      "prepare-data: mask every piece of a word together")(
      "lower-case", po::bool_switch(&lower_case), "prepare-data: lower-case (the default)")(
      "cased", po::bool_switch(&cased), "prepare-data: keep case (a cased vocabulary)")(
      "special-tokens", po::value(&special_tokens),
      "prepare-data: a literal [MASK] in text: split (reference) | keep")(
      "seed", po::value(&prepare.seed), "prepare-data: random seed")(
      "shards", po::value(&prepare.shards), "prepare-data: output part files")(
      "threads", po::value(&prepare.threads), "prepare-data: threads (0: every core)")(
      "pack", po::value(&pack_after), "prepare-data: also pack the output (spfhp | nnlshp)");
  po::positional_options_description positional;
  positional.add("command", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw polyhal::UsageError(fmt::format("{}\n{}", e.what(), kUsage));
  }
  if (vm.count("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (vm.count("version")) {
    std::cout << fmt::format("polyhal {} (plugin ABI {}.{}, op schema {})\n", POLYHAL_VERSION,
                             polyhal::kAbiMajor, polyhal::kAbiMinor, polyhal::kOpSchemaVersion);
    return 0;
  }
  auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off") {
    throw polyhal::UsageError(fmt::format("--log-level: unknown level '{}'", log_level));
  }
  spdlog::set_level(level);
  spdlog::set_pattern("[%l] %v");

  common.executable_dir = executable_dir();
  // A command-line path means what it says where the user typed it.
  for (const auto& p : plugin_paths) common.plugin_paths.push_back(std::filesystem::absolute(p));
  if (!backend.empty()) run.backend = backend;
  run.config = config;
  run.metrics_out = metrics_out;

  auto require_config = [&] {
    if (config.empty())
      throw polyhal::UsageError(fmt::format("'{}' needs --config FILE\n{}", command, kUsage));
  };
  if (command == "plugins") return polyhal::launcher::list_plugins(common);
  if (command == "devices")
    return polyhal::launcher::list_devices(common, run.backend, run.overrides);
  if (command == "validate") {
    require_config();
    return polyhal::launcher::validate_config(common, run);
  }
  if (command == "run") {
    require_config();
    return polyhal::launcher::run_workload(common, run);
  }
  if (command == "pack") {
    if (inputs.size() != 1 || pack.output.empty())
      throw polyhal::UsageError(fmt::format("'pack' needs one --input and --output\n{}", kUsage));
    pack.input = inputs.front();
    return polyhal::launcher::pack_data(pack);
  }
  if (command == "prepare-data") {
    if (inputs.empty() || vocab.empty() || pack.output.empty())
      throw polyhal::UsageError(
          fmt::format("'prepare-data' needs --input, --vocab and --output\n{}", kUsage));
    if (cased && lower_case) throw polyhal::UsageError("--lower-case and --cased: give one");
    if (special_tokens != "split" && special_tokens != "keep")
      throw polyhal::UsageError(fmt::format(
          "--special-tokens: expected split (BERT's reference) or keep, got '{}'", special_tokens));
    for (const auto& input : inputs) prepare.inputs.emplace_back(input);
    prepare.vocab = vocab;
    prepare.output = pack.output;
    prepare.lower_case = !cased;
    prepare.special_tokens = special_tokens == "keep" ? polyhal::SpecialTokensInText::keep
                                                      : polyhal::SpecialTokensInText::split;
    if (vm.count("max-seq-len")) prepare.max_seq_len = pack.max_seq_len;
    std::optional<polyhal::PackOptions> packing;
    if (!pack_after.empty()) {
      packing = pack;
      packing->algorithm = pack_after;
    }
    return polyhal::launcher::prepare_data(prepare, packing);
  }
  if (command.empty()) throw polyhal::UsageError(fmt::format("no command given\n{}", kUsage));
  throw polyhal::UsageError(fmt::format("unknown command '{}'\n{}", command, kUsage));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const polyhal::Error& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(polyhal::ExitCode::failure);
  } catch (...) {  // e.g. a plugin throwing something that is not a std::exception
    std::cerr << "polyhal: error: an exception of unknown type (not derived from "
                 "std::exception) reached the launcher\n";
    return static_cast<int>(polyhal::ExitCode::failure);
  }
}
