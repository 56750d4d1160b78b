#pragma once
// The launcher's commands as a table: one row per command with the handler
// that checks its arguments (its positional rule) and runs it. main.cpp
// parses the command line and runs the row it names; each handler lives in
// its command's file.
#include <span>
#include <string_view>

#include "cli.hpp"

namespace polyhal {

/// A command's handler: checks what the command line gave it and runs the
/// command; returns the exit code. `argc`/`argv`: the whole command line
/// (run --max-restarts reruns it).
using CommandHandler = int (*)(CommandLine& cl, int argc, char** argv);

struct CommandRow {
  std::string_view name;
  CommandHandler run;
};

/// Every command polyhal has.
std::span<const CommandRow> command_table();

/// run, validate and config show: a UsageError with the command's help when
/// the command line names no config.
void require_config(const CommandLine& cl);

/// run, validate and config show: a UsageError with the command's help when
/// the command line names no config.
void require_config(const CommandLine& cl);

int config_command(CommandLine& cl, int argc, char** argv);
int plugins_command(CommandLine& cl, int argc, char** argv);
int devices_command(CommandLine& cl, int argc, char** argv);
int validate_command(CommandLine& cl, int argc, char** argv);
int run_command(CommandLine& cl, int argc, char** argv);
int serve_command(CommandLine& cl, int argc, char** argv);
int supervise_command(CommandLine& cl, int argc, char** argv);
int pack_command(CommandLine& cl, int argc, char** argv);
int convert_command(CommandLine& cl, int argc, char** argv);
int report_command(CommandLine& cl, int argc, char** argv);
int prepare_data_command(CommandLine& cl, int argc, char** argv);

}  // namespace polyhal
