#include "cli.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/suggest.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "serve/serve_flags.hpp"

namespace polyhal {
namespace {

namespace po = boost::program_options;

/// One command: what it is for, how it is called, which option groups it
/// takes, and examples for its help.
struct CommandSpec {
  std::string name;
  std::string brief;  ///< the overview's one line
  std::string synopsis;
  std::string summary;
  std::vector<std::string> groups;
  std::string examples;
};

// The command table: one row per command (a constant, not a function: it is data).
const std::vector<CommandSpec> kCommands{
    {"plugins",
     "list the plugins found, and why any was refused",
     "polyhal plugins [--plugin-path DIR]...",
     "Lists the plugin search path and every plugin found, each loaded in a child process, "
     "and why any was not loaded.",
     {"plugins"},
     "  polyhal plugins\n  polyhal plugins --plugin-path /opt/my-plugins\n"},
    {"devices",
     "list devices and their properties (measured or modelled)",
     "polyhal devices [--backend NAME] [--set device.OPTION=value]... [--options]",
     "Lists devices and their properties, each marked measured, datasheet, derived or "
     "modelled.",
     {"plugins", "devices"},
     "  polyhal devices --backend ipu\n  polyhal devices --backend cpu --set device.isa=avx2\n"
     "  polyhal devices --backend gaudi --options\n"},
    {"run",
     "run what a config describes: inference, training, a benchmark",
     "polyhal run CONFIG [--backend NAME] [--set key.path=value]... [--compile-only]",
     "Runs the workload a config describes (inference, pre-training, fine-tuning, matmul "
     "benchmark). CONFIG may also be given as --config FILE.",
     {"plugins", "config", "run", "memory-report"},
     "  polyhal run /usr/share/polyhal/configs/bert-demo-cpu.yaml\n"
     "  polyhal run pretrain.yaml --backend gaudi --set batch.micro=16 --metrics-out m.jsonl\n"
     "  polyhal run pretrain-bert-large-phase1-ipu.yaml --compile-only   # will it fit?\n"
     "  mpirun -np 2 polyhal run pretrain.yaml --set collective=mpi\n"
     "  polyhal run pretrain.yaml --max-restarts 3   # restart from the last checkpoint\n"},
    {"serve",
     "serve models over HTTP (OpenAI, TEI and Cohere APIs)",
     "polyhal serve MODEL_DIR|CONFIG [--model DIR]... [--port P] [--host ADDRESS] "
     "[--precision P] [--api-key-file FILE] [--max-batch-tokens N] [--cors-allow-origin O,...] "
     "[--backend NAME] [--set key.path=value]... [--check]",
     "Serves a model directory as it is (text-embeddings-inference's one command: "
     "MODEL_DIR alone, or MODEL_ID, PORT, MAX_BATCH_TOKENS and API_KEY in the environment), "
     "or loads the model of a text-inference config (model.dir, or hf_config, weights and "
     "data.vocab); --model adds more directories, picked by a request's \"model\". An "
     "embedding model answers POST /v1/embeddings, /embeddings (OpenAI's API), /embed, "
     "/embed_all and /similarity (text-embeddings-inference's); a classifier or cross-encoder "
     "POST /predict and /rerank (TEI's and Cohere's shapes); a SQuAD model POST "
     "/v1/question-answering; every model POST /, /tokenize and /decode; the server GET "
     "/health, /ready, /v1/models, /info, /metrics and /openapi.json. Requests are batched by "
     "tokens into packed rows. The config's serve section sets the address (127.0.0.1:8080), "
     "limits, CORS and a bearer token; SIGTERM or Ctrl-C stops it after answering what is in "
     "flight. docs/serving.md.",
     {"plugins", "config", "serve"},
     "  polyhal serve all-MiniLM-L6-v2/ --port 8080\n"
     "  polyhal serve minilm.yaml\n"
     "  polyhal serve minilm.yaml --set serve.port=9000 --set serve.host=0.0.0.0\n"
     "  polyhal serve /etc/polyhal/serve.yaml --check   # load the model, do not listen\n"},
    {"validate",
     "check a config as run would, without running it",
     "polyhal validate CONFIG [--backend NAME] [--set key.path=value]... [--skip-inputs]",
     "Checks a config as run would, short of allocating: keys, the input files it names, "
     "plugin, device options, kernels, data, output places and the memory plan. ok (exit 0) "
     "means run starts; a bad config or a missing input is exit 2, a plan that does not fit "
     "exit 1.",
     {"plugins", "config", "memory-report", "validate"},
     "  polyhal validate pretrain.yaml --set model.seq_len=512\n"
     "  polyhal validate pod64.yaml --skip-inputs   # written for another machine\n"},
    {"pack",
     "pack MLPerf HDF5 pre-training data into multi-sequence rows",
     "polyhal pack --input FILE_OR_DIR --output DIR [--max-seq-len 512]",
     "Packs MLPerf HDF5 pre-training data into rows of several sequences (SPFHP or NNLSHP) "
     "and prints the efficiency and speed-up.",
     {"data", "pack"},
     "  polyhal pack --input hdf5/ --output packed/ --max-seq-len 512 --algorithm nnlshp\n"},
    {"prepare-data",
     "turn text into MLPerf HDF5 pre-training data",
     "polyhal prepare-data --input TEXT... --vocab vocab.txt --output DIR",
     "Turns text into MLPerf HDF5 pre-training data as BERT's create_pretraining_data.py "
     "does (and packs it with --pack).",
     {"data", "prepare"},
     "  polyhal prepare-data --input wiki/ --vocab vocab.txt --output hdf5/ --max-seq-len 128\n"},
    {"convert",
     "convert a TensorFlow BERT checkpoint to Hugging Face or polyhal",
     "polyhal convert --input TF_CHECKPOINT_OR_DIR --output DIR [--bert-config FILE] "
     "[--vocab FILE] [--cased] [--to hf|checkpoint]",
     "Converts a TensorFlow BERT checkpoint (Google's names: the released models, the MLPerf "
     "phase-1 checkpoint, the vendors' TensorFlow recipes) into a Hugging Face directory "
     "(config.json, model.safetensors, vocab.txt, tokenizer_config.json) that checkpoint.init, "
     "model.weights and transformers read; optimizer slots are left out. With --to checkpoint: "
     "a polyhal pre-training checkpoint with the Adam/LAMB moments and global_step, which "
     "task pretrain resumes from (checkpoint.dir, checkpoint.resume: true).",
     {"convert"},
     "  polyhal convert --input uncased_L-24_H-1024_A-16/ --output bert-large-uncased/\n"
     "  polyhal convert --input phase1/model.ckpt-28252 --bert-config bert_config.json \\\n"
     "                  --vocab vocab.txt --output mlperf-phase1/\n"
     "  polyhal convert --input phase1/model.ckpt-28252 --to checkpoint --output ckpt/\n"},
    {"config",
     "show a resolved config, or the reference of every key",
     "polyhal config show CONFIG [--set key.path=value]... | polyhal config reference",
     "show: the resolved config, every key that applies to its task with its value and where "
     "it came from (file:line, --set, or default), and every device option of its backend "
     "(given, or the backend's default), checked as validate checks them. reference: every "
     "key, its default and what it does (docs/config-reference.md).",
     {"config"},
     "  polyhal config show pretrain.yaml --set batch.micro=16\n"
     "  polyhal config reference > config-reference.md\n"},
    {"report",
     "turn runs' metrics into one HTML page of charts",
     "polyhal report METRICS_FILE_OR_DIR... [--output FILE] [--chain]",
     "Turns runs' metrics (run --metrics-out, or a directory of them) into one "
     "self-contained HTML page of charts: loss, learning rate, loss scale, gradient norm, "
     "throughput and evaluation metrics over the steps, and a summary table; several runs "
     "overlay their curves, or with --chain follow one another on one step axis (a recipe's "
     "stages, in the order given).",
     {"report"},
     "  polyhal run pretrain.yaml --metrics-out m.jsonl && polyhal report m.jsonl\n"
     "  polyhal report base.jsonl large.jsonl --output compare.html\n"
     "  polyhal report --chain state/phase1.metrics.jsonl state/phase2.metrics.jsonl "
     "state/squad.metrics.jsonl\n"},
    {"supervise",
     "run a job; restart it from its checkpoint when a replica is lost",
     "polyhal supervise [--max-restarts N] -- COMMAND [ARGUMENTS]...",
     "Runs a job (mpirun across hosts, typically) and restarts it, at most N times (3), when "
     "it loses a replica: exit code 4 (a collective timed out) or a process killed by a "
     "signal. A training run with checkpoint.dir resumes from its last checkpoint. Other "
     "failures and Ctrl-C (passed on to the job) end it at once.",
     {"supervise"},
     "  polyhal supervise --max-restarts 3 -- mpirun --hostfile hosts -np 8 \\\n"
     "      polyhal run pretrain.yaml --set collective=mpi\n"},
    {"help",
     "show the overview, or one command's help",
     "polyhal help [COMMAND]",
     "Shows the overview, or one command's help.",
     {},
     ""},
};

const std::vector<CommandSpec>& commands() {
  return kCommands;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

[[noreturn]] void unknown_command(const std::string& name) {
  const auto near = nearest_word(name, command_names());
  throw UsageError(fmt::format("unknown command '{}'{}\n{}", name,
                               near ? fmt::format(" (did you mean '{}'?)", *near) : "",
                               overview_help()));
}

/// The options of `group`, bound to `cl`.
po::options_description group_options(const std::string& group, CommandLine& cl) {
  if (group == "general") {
    po::options_description d("general options");
    d.add_options()("help,h", po::bool_switch(&cl.help), "show this help")(
        "version", po::bool_switch(&cl.version), "print version and plugin ABI")(
        "log-level", po::value(&cl.log_level)->value_name("LEVEL"),
        "trace, debug, info, warn, error, off; beats the config's log.level (info); logs go to "
        "stderr")("progress", po::value<std::string>()->value_name("HOW"),
                  "auto (a live bar on a terminal, lines otherwise), bar, lines or none");
    return d;
  }
  if (group == "plugins") {
    po::options_description d("plugin options");
    d.add_options()("plugin-path",
                    po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
                    "search DIR for plugins first (repeatable)")(
        "allow-world-writable-plugins", po::bool_switch(&cl.common.allow_world_writable_plugins),
        "load plugins from places others can write (unsafe; never from a config)");
    return d;
  }
  if (group == "devices") {
    po::options_description d("device options");
    d.add_options()("backend", po::value<std::string>()->value_name("NAME"),
                    "only this backend's devices")(
        "set", po::value(&cl.run.overrides)->composing()->value_name("device.OPTION=value"),
        "a device option (repeatable; needs --backend)")(
        "options", po::bool_switch(&cl.device_options),
        "list each backend's device options: type, default and help");
    return d;
  }
  if (group == "config") {
    po::options_description d("config options");
    d.add_options()("config", po::value<std::string>()->value_name("FILE"),
                    "the YAML config (or give it as the first argument)")(
        "backend", po::value<std::string>()->value_name("NAME"),
        "backend to run on (overrides the config's 'backend')")(
        "set", po::value(&cl.run.overrides)->composing()->value_name("key.path=value"),
        "override a config key, value in YAML (repeatable); key.path=null unsets a key the "
        "config gives");
    return d;
  }
  if (group == "run") {
    po::options_description d("run options");
    d.add_options()("compile-only", po::bool_switch(&cl.run.compile_only),
                    "prepare and report memory (and estimates on device models); run nothing")(
        "metrics-out", po::value<std::string>()->value_name("FILE"),
        "write JSON-lines metrics to FILE (last line: the summary)")(
        "tensorboard", po::value<std::string>()->value_name("DIR"),
        "write TensorBoard scalars (loss, learning rate, loss scale, gradient norm, "
        "throughput, evaluation metrics) to an event file in DIR")(
        "metrics-csv", po::value<std::string>()->value_name("FILE"),
        "write every metric to FILE as CSV rows: time,event,step,name,value")(
        "profile", po::value<std::string>()->value_name("START:END"),
        "trace optimizer steps START..END (or one step) as Chrome/Perfetto trace-event JSON: "
        "kernel runs and host phases as measured, or a device model's estimated timeline")(
        "profile-out", po::value<std::string>()->value_name("FILE"),
        "where --profile writes its trace (polyhal-trace.json; MPI ranks add .rankN)")(
        "max-restarts", po::value<int>()->value_name("N"),
        "restart the run from its last checkpoint, at most N times, when it loses a replica "
        "(as polyhal supervise; not under mpirun: supervise mpirun instead)");
    return d;
  }
  if (group == "memory-report") {
    po::options_description d("memory report");
    d.add_options()("report", po::value<std::string>()->value_name("DIR"),
                    "also write DIR/memory.html: the memory plan as a page of charts (after a "
                    "run on this host, with the measured peak)");
    return d;
  }
  if (group == "validate") {
    po::options_description d("validate options");
    d.add_options()("skip-inputs", po::bool_switch(&cl.run.skip_inputs),
                    "do not require the files the config reads (checkpoint.init, data.vocab, "
                    "finetune.train_file, ...) to exist here: a config for another machine");
    return d;
  }
  if (group == "serve") {
    po::options_description d = serve_flag_options();
    d.add_options()("check", po::bool_switch(&cl.serve_check),
                    "load the model and check the config, then exit 0 without listening");
    return d;
  }
  if (group == "supervise") {
    po::options_description d("supervise options");
    d.add_options()("max-restarts", po::value<int>()->value_name("N"),
                    "restarts after a lost replica, at most (3)");
    return d;
  }
  if (group == "report") {
    po::options_description d("report options");
    d.add_options()("output,o", po::value(&cl.pack.output)->value_name("FILE"),
                    "the HTML page to write (polyhal-report.html)")(
        "chain", po::bool_switch(&cl.chain),
        "runs one after another on one step axis (a recipe's stages), not overlaid");
    return d;
  }
  if (group == "data") {
    po::options_description d("data options");
    d.add_options()("input", po::value(&cl.inputs)->composing()->multitoken()->value_name("PATH"),
                    "pack: MLPerf HDF5 file or directory; prepare-data: text files or "
                    "directories, several after one --input or --input each")(
        "output", po::value(&cl.pack.output)->value_name("DIR"), "output directory")(
        "max-seq-len", po::value(&cl.pack.max_seq_len)->value_name("N"),
        "tokens per row (pack: 512; prepare-data: 128)")(
        "max-sequences-per-pack", po::value(&cl.pack.max_sequences_per_pack)->value_name("N"),
        "sequences per packed row at most (3)");
    return d;
  }
  if (group == "pack") {
    po::options_description d("pack options");
    d.add_options()("algorithm", po::value(&cl.pack.algorithm)->value_name("NAME"),
                    "spfhp (default) or nnlshp")("rows-per-file",
                                                 po::value(&cl.pack.rows_per_file)->value_name("N"),
                                                 "packed rows per output file (16384)");
    return d;
  }
  if (group == "convert") {
    po::options_description d("convert options");
    d.add_options()("input", po::value(&cl.inputs)->composing()->value_name("PATH"),
                    "a TensorFlow checkpoint prefix (DIR/model.ckpt-28252) or a directory "
                    "holding one")("output", po::value(&cl.pack.output)->value_name("DIR"),
                                   "the Hugging Face directory to write")(
        "bert-config", po::value(&cl.bert_config)->value_name("FILE"),
        "the model's bert_config.json (default: beside the checkpoint)")(
        "vocab", po::value(&cl.vocab)->value_name("FILE"),
        "vocab.txt to copy in (default: beside the checkpoint)")(
        "cased", po::bool_switch(&cl.cased), "a cased model: do_lower_case false")(
        "to", po::value(&cl.convert_to)->value_name("FORMAT"),
        "hf (default): a Hugging Face directory; checkpoint: a polyhal checkpoint directory "
        "with the optimizer moments and global_step, for checkpoint.dir and resume");
    return d;
  }
  po::options_description d("prepare-data options");
  d.add_options()("vocab", po::value(&cl.vocab)->value_name("FILE"), "BERT vocab.txt")(
      "max-predictions", po::value(&cl.prepare.max_predictions)->value_name("N"),
      "masked tokens per sequence at most (20)")(
      "masked-lm-prob", po::value(&cl.prepare.masked_lm_prob)->value_name("P"),
      "share of tokens masked (0.15)")("dupe-factor",
                                       po::value(&cl.prepare.dupe_factor)->value_name("N"),
                                       "passes over the documents, each masked anew (10)")(
      "short-seq-prob", po::value(&cl.prepare.short_seq_prob)->value_name("P"),
      "share of instances with a shorter target length (0.1)")(
      "whole-word-masking", po::bool_switch(&cl.prepare.whole_word_masking),
      "mask every piece of a word together")("lower-case", po::bool_switch(&cl.lower_case),
                                             "lower-case the text (the default)")(
      "cased", po::bool_switch(&cl.cased), "keep case (a cased vocabulary)")(
      "special-tokens", po::value(&cl.special_tokens)->value_name("HOW"),
      "a literal [MASK] in text: split (BERT's reference, default) or keep")(
      "seed", po::value(&cl.prepare.seed)->value_name("N"), "random seed (12345)")(
      "shards", po::value(&cl.prepare.shards)->value_name("N"), "output part files (1)")(
      "threads", po::value(&cl.prepare.threads)->value_name("N"), "threads (0: every core)")(
      "pack", po::value(&cl.pack_after)->value_name("ALGORITHM"),
      "also pack the output into OUTPUT/packed (spfhp or nnlshp)");
  return d;
}

po::options_description options_of(const CommandSpec& spec, CommandLine& cl) {
  po::options_description all;
  all.add(group_options("general", cl));
  for (const auto& group : spec.groups) all.add(group_options(group, cl));
  return all;
}

/// `text` wrapped at 78 columns.
std::string wrapped(const std::string& text) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > 78) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

std::vector<std::string> option_names(const po::options_description& d) {
  std::vector<std::string> names;
  for (const auto& option : d.options()) names.push_back("--" + option->long_name());
  return names;
}

/// The command word and where it is: the first argument that is neither an
/// option nor the value of --log-level (the one option before a command
/// that takes a value).
std::pair<std::string, int> find_command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (!arg.starts_with("-")) return {arg, i};
  }
  return {"", -1};
}

}  // namespace

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  return names;
}

namespace {

/// The values of option `option` (as typed, "--set"), or nullopt when it takes none we know.
std::optional<std::vector<std::string>> option_values(const std::string& option,
                                                      const std::vector<std::string>& backends) {
  if (option == "--backend") return backends;
  if (option == "--log-level")
    return std::vector<std::string>{"trace", "debug", "info", "warn", "error", "off"};
  if (option == "--progress") return std::vector<std::string>{"auto", "bar", "lines", "none"};
  if (option == "--set") {
    std::set<std::string> keys;
    for (const auto& schema : task_schemas())
      for (const ConfigKey* key : task_keys(schema)) keys.insert(key->path + "=");
    return std::vector<std::string>(keys.begin(), keys.end());
  }
  return std::nullopt;
}

}  // namespace

std::string completion_candidates(const std::vector<std::string>& words,
                                  const std::vector<std::string>& backends) {
  const CommandSpec* command = nullptr;
  for (std::size_t i = 0; i + 1 < words.size() && command == nullptr; ++i)
    command = find_command(words[i]);
  std::vector<std::string> candidates;
  const std::string previous = words.size() >= 2 ? words[words.size() - 2] : std::string();
  if (const auto values = option_values(previous, backends)) {
    candidates = *values;
  } else if (command != nullptr && command->name == "config" && previous == "config") {
    candidates = {"show", "reference"};
  } else if (command == nullptr || command->name == "help") {
    candidates = command_names();
    if (command == nullptr) {
      CommandLine scratch;
      for (const auto& option : option_names(group_options("general", scratch)))
        candidates.push_back(option);
    }
  } else {
    CommandLine scratch;
    candidates = option_names(options_of(*command, scratch));
  }
  std::string text;
  for (const auto& c : candidates) {
    if (c != "help" || command == nullptr || previous == "help") text += c + "\n";
  }
  return text;
}

std::string overview_help() {
  std::string text =
      "usage: polyhal [--version] [--log-level LEVEL] <command> [options]\n"
      "       polyhal help <command>    (or: polyhal <command> --help)\n\ncommands:\n";
  for (const auto& c : commands()) {
    text += fmt::format("  {:<13} {}\n", c.name, c.brief);
  }
  text +=
      "\nexit codes: 0 ok, 1 failure while running (or the plan does not fit),\n"
      "            2 bad usage or config, 3 plugin or device unavailable,\n"
      "            4 a replica was lost (an MPI rank died or a collective timed out)\n";
  return text;
}

std::string command_help(const std::string& command) {
  const CommandSpec* spec = find_command(command);
  if (spec == nullptr) unknown_command(command);
  CommandLine scratch;
  std::ostringstream options;
  options << options_of(*spec, scratch);
  std::string text = fmt::format("usage: {}\n\n{}\n\n{}", spec->synopsis, wrapped(spec->summary),
                                 spec->name == "help" ? std::string() : options.str());
  if (!spec->examples.empty()) text += "\nexamples:\n" + spec->examples;
  return text;
}

namespace {

/// supervise without "--": the job's words would be taken for supervise's own.
void refuse_job_words_without_separator(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--max-restarts" || arg == "--log-level" || arg == "--progress")
      ++i;
    else if (!arg.starts_with("--max-restarts=") && arg != "--help" && arg != "-h")
      throw UsageError(fmt::format(
          "supervise: put '--' before the job's command ('{}')\nrun 'polyhal help supervise' for "
          "its options",
          arg));
  }
}

/// The options' values that need more than program_options' binding.
void read_option_values(const po::variables_map& vm, CommandLine& cl) {
  if (vm.count("backend")) cl.backend = vm["backend"].as<std::string>();
  if (vm.count("metrics-out")) cl.run.metrics_out = vm["metrics-out"].as<std::string>();
  if (vm.count("tensorboard")) cl.run.tensorboard_dir = vm["tensorboard"].as<std::string>();
  if (vm.count("metrics-csv")) cl.run.metrics_csv = vm["metrics-csv"].as<std::string>();
  if (vm.count("profile")) {
    try {
      cl.run.profile = parse_step_window(vm["profile"].as<std::string>(), "--profile");
    } catch (const ConfigError& e) {
      throw UsageError(e.what());
    }
  }
  if (vm.count("profile-out")) cl.run.profile_out = vm["profile-out"].as<std::string>();
  cl.log_level_given = vm.count("log-level") > 0 && !vm["log-level"].defaulted();
  if (vm.count("max-restarts")) cl.max_restarts = vm["max-restarts"].as<int>();
  if (vm.count("report")) cl.run.report_dir = vm["report"].as<std::string>();
  if (vm.count("plugin-path")) {
    // A command-line path means what it says where the user typed it.
    for (const auto& p : vm["plugin-path"].as<std::vector<std::string>>())
      cl.common.plugin_paths.push_back(std::filesystem::absolute(p));
  }
  cl.max_seq_len_given = vm.count("max-seq-len") > 0;
  if (vm.count("progress")) cl.run.progress = progress_mode(vm["progress"].as<std::string>());
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine cl;
  const auto [word, at] = find_command_word(argc, argv);
  if (!word.empty() && find_command(word) == nullptr) unknown_command(word);
  static const CommandSpec kNone{"", "", "", "", {}, ""};
  const CommandSpec& spec = word.empty() ? kNone : *find_command(word);
  cl.command = word;

  po::options_description options = options_of(spec, cl);
  po::options_description hidden;
  hidden.add_options()("positional", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("positional", -1);
  std::vector<std::string> args;
  std::vector<std::string> job;  // supervise: everything after "--" is the job's own
  for (int i = 1; i < argc; ++i) {
    if (i == at) continue;
    if (cl.command == "supervise" && i > at && std::string_view(argv[i]) == "--") {
      job.assign(argv + i + 1, argv + argc);
      break;
    }
    args.emplace_back(argv[i]);
  }
  if (cl.command == "supervise" && job.empty()) refuse_job_words_without_separator(args);
  po::variables_map vm;
  const std::string usage_hint =
      word.empty() ? overview_help() : fmt::format("run 'polyhal help {}' for its options", word);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    const std::string typed = e.get_option_name();
    const auto near = nearest_word(typed, option_names(options));
    std::string elsewhere;
    for (const auto& other : commands()) {  // an option of another command
      CommandLine scratch;
      const auto names = option_names(options_of(other, scratch));
      if (other.name != word && std::find(names.begin(), names.end(), typed) != names.end()) {
        elsewhere = fmt::format(" ('{}' is an option of '{}')", typed, other.name);
        break;
      }
    }
    throw UsageError(fmt::format(
        "unrecognised option '{}'{}{}{}\n{}", typed, word.empty() ? "" : " for '" + word + "'",
        near ? fmt::format(" (did you mean '{}'?)", *near) : "", elsewhere, usage_hint));
  } catch (const po::error& e) {
    throw UsageError(fmt::format("{}\n{}", e.what(), usage_hint));
  }

  std::vector<std::string> extra;
  if (vm.count("positional")) extra = vm["positional"].as<std::vector<std::string>>();
  if (cl.command == "report") {  // the metrics files are its positional arguments
    cl.inputs = extra;
    extra.clear();
  }
  if (cl.command == "supervise") {
    if (!extra.empty())
      throw UsageError(fmt::format("supervise: put '--' before the job's command ('{}')\n{}",
                                   extra.front(), usage_hint));
    cl.inputs = job;
  }
  if (cl.command == "help") {
    if (extra.size() > 1) throw UsageError("'help' takes one command at most");
    cl.help = true;
    if (!extra.empty()) cl.help_topic = extra.front();
    return cl;
  }
  if (cl.help) {
    cl.help_topic = cl.command;
    return cl;
  }
  // run and validate take the config as their one positional argument.
  std::string config = vm.count("config") ? vm["config"].as<std::string>() : "";
  if (cl.command == "config") {  // config show CONFIG | config reference
    if (extra.empty() || (extra.front() != "show" && extra.front() != "reference")) {
      throw UsageError(fmt::format("'config' needs show or reference{}\n{}",
                                   extra.empty() ? "" : ", got '" + extra.front() + "'",
                                   usage_hint));
    }
    cl.config_action = extra.front();
    extra.erase(extra.begin());
    if (cl.config_action == "reference" && !extra.empty())
      throw UsageError("'config reference' takes no config");
  }
  if ((cl.command == "run" || cl.command == "validate" || cl.command == "config" ||
       cl.command == "serve") &&
      !extra.empty()) {
    if (extra.size() > 1 || !config.empty()) {
      throw UsageError(fmt::format("'{}' takes one config, got {}{}", cl.command,
                                   fmt::join(extra, ", "), config.empty() ? "" : " and --config"));
    }
    config = extra.front();
    extra.clear();
  }
  if (!extra.empty()) {
    throw UsageError(fmt::format("unexpected argument '{}'{}\n{}", extra.front(),
                                 cl.command.empty() ? "" : " for '" + cl.command + "'",
                                 usage_hint));
  }
  cl.run.config = config;
  read_option_values(vm, cl);
  if (cl.command == "serve") add_serve_overrides(vm, cl);
  return cl;
}

}  // namespace polyhal
