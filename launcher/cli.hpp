#pragma once
// The command line: one table of commands, each with its own options, its
// own help (`polyhal help run`, `polyhal run --help`) and suggestions for a
// mistyped command or option. Parsing only: commands.cpp runs them.
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/prepare_data.hpp"

namespace polyhal {

/// Everything the command line can set, filled by parse_command_line.
struct CommandLine {
  std::string command;     ///< empty: none given
  std::string help_topic;  ///< `help TOPIC`, or the command of `COMMAND --help`
  bool help = false;       ///< print help (of help_topic, or the overview)
  bool version = false;
  std::string log_level = "info";
  bool log_level_given = false;  ///< --log-level on the command line
  CommonOptions common;
  RunOptions run;
  std::optional<std::string> backend;
  PackOptions pack;
  PrepareDataOptions prepare;
  std::vector<std::string> inputs;
  std::string vocab, special_tokens = "split", pack_after;
  std::string bert_config;  ///< convert --bert-config
  bool cased = false, lower_case = false;
  std::string convert_to = "hf";  ///< convert --to
  bool max_seq_len_given = false;
  bool device_options = false;      ///< devices --options
  bool serve_check = false;         ///< serve --check: load and validate, do not listen
  bool serve_model_dir = false;     ///< serve MODEL_DIR: no config file, the flags make it
  bool chain = false;               ///< report --chain: runs one after another on one step axis
  std::string config_action;        ///< config show | config reference
  std::optional<int> max_restarts;  ///< run --max-restarts, supervise --max-restarts
};

/// Parses argv. Throws UsageError (exit 2) naming the nearest command or
/// option for one it does not know.
CommandLine parse_command_line(int argc, char** argv);

/// The overview: every command with its one-line summary, exit codes.
std::string overview_help();
/// One command's help: synopsis, what it does, its options, examples.
/// Throws UsageError for an unknown command (with a suggestion).
std::string command_help(const std::string& command);
/// The commands, in the order the overview lists them.
std::vector<std::string> command_names();

/// For shell completion (`polyhal __complete WORD...`, the words typed after
/// `polyhal`, the last one being completed): the commands, or the options of
/// the command already typed, one per line.
/// After an option that takes a value, its values instead: `backends` after
/// --backend, the config keys (as "key.path=") after --set, the levels
/// after --log-level, the modes after --progress; show and reference after
/// `config`.
std::string completion_candidates(const std::vector<std::string>& words,
                                  const std::vector<std::string>& backends);

}  // namespace polyhal
