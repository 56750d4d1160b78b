// `polyhal serve CONFIG`: a text-inference config's model (and those of
// serve.models) held open behind an HTTP server (docs/serving.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "command_table.hpp"
#include "log_file_sink.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/json_input.hpp"
#include "polyhal/app/serve_settings.hpp"
#include "polyhal/app/served_model.hpp"
#include "polyhal/error.hpp"
#include "run_setup.hpp"
#include "serve/http_server.hpp"

namespace polyhal {
namespace {

/// serve.api_key_file's token (surrounding whitespace dropped).
std::string read_api_key(const RunConfig& config) {
  const auto& file = serve_settings(config).api_key_file;
  if (file.empty()) return {};
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  const auto first = key.find_first_not_of(" \t\r\n");
  const auto last = key.find_last_not_of(" \t\r\n");
  key = first == std::string::npos ? "" : key.substr(first, last - first + 1);
  if (!in || key.empty() || key.find_first_of(" \t\r\n") != std::string::npos)
    throw config.error(
        "serve.api_key_file",
        fmt::format("{}: expected one token (a line without spaces)", file.string()));
  // As ssh does for a private key: a token others on the machine can read
  // is no secret. Warned, not refused: a container's mounted secret may be
  // readable by its group.
  std::error_code ec;
  const auto mode = std::filesystem::status(file, ec).permissions();
  using std::filesystem::perms;
  if (!ec && (mode & (perms::group_all | perms::others_all)) != perms::none)
    spdlog::warn("{}: serve.api_key_file {} is readable by others (mode {:04o}): chmod 600 {}",
                 config.locate("serve.api_key_file"), file.string(),
                 static_cast<unsigned>(mode & perms::mask), file.string());
  return key;
}

/// config_sentence_transformers.json's "prompts" and "default_prompt_name"
/// in the model directory, when it has them.
struct Prompts {
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
};

Prompts read_prompts(const RunConfig& config) {
  Prompts state;
  if (config.model.dir.empty()) return state;
  const auto file = config.model.dir / "config_sentence_transformers.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) return state;
  if (std::filesystem::file_size(file, error) > (1u << 20))
    throw ConfigError(
        fmt::format("{}: over 1 MiB: not a sentence-transformers config", file.string()));
  const auto fail = [&](const std::string& key, const std::string& why) {
    throw ConfigError(fmt::format("{}: key '{}': {}", file.string(), key, why));
  };
  nlohmann::json json;
  try {
    std::ifstream in(file);
    json = parse_json_input(in, file.string());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not JSON: {}", file.string(), e.what()));
  }
  if (!json.is_object()) return state;
  if (const auto it = json.find("prompts"); it != json.end() && !it->is_null()) {
    if (!it->is_object()) fail("prompts", "expected an object of name: prompt text");
    for (const auto& [name, text] : it->items()) {
      if (!text.is_string()) fail("prompts", fmt::format("'{}' is not a string", name));
      state.prompts[name] = text.get<std::string>();
    }
  }
  if (const auto it = json.find("default_prompt_name"); it != json.end() && !it->is_null()) {
    if (!it->is_string() || !state.prompts.contains(it->get<std::string>()))
      fail("default_prompt_name", fmt::format("{} is not one of its prompts", it->dump()));
    state.default_prompt_name = it->get<std::string>();
  }
  return state;
}

std::string served_name(const RunConfig& config, const RunPlan& plan, bool first) {
  const auto& s = serve_settings(config);
  if (first && !s.model_name.empty()) return s.model_name;
  auto dir = config.model.dir;
  if (!dir.empty()) return (dir.has_filename() ? dir : dir.parent_path()).filename().string();
  return plan.model.name;
}

/// A few texts of several lengths through the model before /ready says so:
/// the first batches prepare kernels and touch memory.
void warm_up(ServedModel& model) {
  std::vector<ServedModel::Text> texts;
  std::string words;
  for (int n : {1, 8, 40, 200}) {
    while (static_cast<int>(words.size()) < n * 6) words += "warm up the model ";
    texts.push_back(model.tokenize(words));
  }
  for (int i = 0; i < 2; ++i) (void)model.run(texts);
}

/// One served model: its config (the server's, with model.dir its own),
/// the devices it was planned on, and its replicas.
struct LoadedModel {
  RunConfig config;
  OpenedRun opened;
  std::vector<std::unique_ptr<ServedModel>> replicas;
  std::string name;
  Prompts prompts;
};

LoadedModel load_model(const CommandLine& cl, RunConfig config, bool first) {
  const auto& settings = serve_settings(config);
  LoadedModel out{std::move(config), {}, {}, {}, {}};
  out.opened = open_configured_run(cl.common, out.config, WorldShape{}, false);
  const ServedTextOptions options = served_text_options(out.config);
  for (std::int64_t i = 0; i < (cl.serve_check ? 1 : settings.replicas); ++i)
    out.replicas.push_back(
        std::make_unique<ServedModel>(out.opened.device(), out.config, out.opened.plan, options));
  out.name = served_name(out.config, out.opened.plan, first);
  out.prompts = read_prompts(out.config);
  return out;
}

/// The models of serve.models beside model.dir: each the server's config
/// with its own model.dir (its own length, pooling, heads and prompts).
std::vector<LoadedModel> load_models(const CommandLine& cl, const RunConfig& config) {
  std::vector<LoadedModel> models;
  models.push_back(load_model(cl, config, true));
  for (const auto& dir : serve_settings(config).models) {
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error))
      throw config.error("serve.models", fmt::format("{}: not a model directory", dir.string()));
    RunOptions run = cl.run;
    run.overrides.push_back("model.dir=" + nlohmann::json(dir.string()).dump());
    run.override_origins.push_back(fmt::format("serve.models: {}", dir.string()));
    models.push_back(load_model(cl, loaded_config(run), false));
    for (std::size_t i = 0; i + 1 < models.size(); ++i)
      if (models[i].name == models.back().name)
        throw config.error("serve.models",
                           fmt::format("{}: a second model named '{}' (its directory's name): "
                                       "serve each under a directory of its own name",
                                       dir.string(), models.back().name));
  }
  return models;
}

}  // namespace

int serve_command(CommandLine& cl, int, char**) {
  if (!cl.serve_model_dir) require_config(cl);
  const RunConfig config = loaded_config(cl.run);
  if (config.task != "inference")
    throw config.error("task", fmt::format("{}: polyhal serve serves a text model: task: inference "
                                           "(model.dir or hf_config and weights)",
                                           config.task));
  check_input_paths(config);
  const auto log = configure_logging(cl.common, config);
  const auto& settings = serve_settings(config);
  // Bound before the model loads: a port in use is said now (exit 2).
  std::optional<serve::BoundPort> bound;
  if (!cl.serve_check) bound.emplace(settings, config.locate("serve.port"));
  std::vector<LoadedModel> loaded = load_models(cl, config);
  std::string key = read_api_key(config);
  // text-embeddings-inference's API_KEY, in the one-command form only.
  if (const char* env = std::getenv("API_KEY"); key.empty() && cl.serve_model_dir && env && *env)
    key = env;
  std::vector<std::string> described;
  for (const auto& m : loaded) {
    const ServedModel& model = *m.replicas.front();
    described.push_back(fmt::format("model {} ({}, {} tokens at most) on {} {}", m.name,
                                    model.description(), model.max_tokens(), m.config.backend,
                                    m.opened.device().name()));
  }
  const std::string what =
      fmt::format("{}{}, batches of up to {} tokens", fmt::join(described, "; "),
                  settings.replicas > 1 ? fmt::format(" x {} replicas", settings.replicas) : "",
                  settings.max_batch_tokens);
  if (cl.serve_check) {
    std::cout << "ok: polyhal serve would serve " << what << " on " << settings.host << ":"
              << settings.port << (key.empty() ? "" : " (bearer token required)") << "\n";
    return 0;
  }
  std::vector<serve::ServedEntry> entries;
  std::vector<std::vector<ServedModel*>> workers(static_cast<std::size_t>(settings.replicas));
  for (std::size_t m = 0; m < loaded.size(); ++m) {
    auto& each = loaded[m];
    entries.push_back({*each.replicas.front(), each.name, m, std::move(each.prompts.prompts),
                       std::move(each.prompts.default_prompt_name)});
    for (std::size_t w = 0; w < workers.size(); ++w) workers[w].push_back(each.replicas[w].get());
  }
  serve::ServerState state(std::move(entries), workers, settings, key);
  serve::HttpServer server(state);
  const unsigned short port = server.listen(*bound);
  for (const auto& replicas : workers)
    for (auto* replica : replicas) warm_up(*replica);
  state.ready = true;
  // An IPv6 address in a URL is bracketed (RFC 3986): http://[::1]:8080/.
  const std::string host =
      settings.host.find(':') == std::string::npos ? settings.host : "[" + settings.host + "]";
  std::cout << fmt::format("polyhal serve: listening on http://{}:{}/ ({}){}\n", host, port, what,
                           key.empty() ? "" : "; bearer token required")
            << std::flush;
  spdlog::info("serve: ready on {}:{}", host, port);
  const bool all_answered = server.run(2);
  std::cout << (all_answered ? "polyhal serve: stopped; every request in flight was answered\n"
                             : "polyhal serve: stopped after serve.timeout_seconds with requests "
                               "unanswered (they got 'the server is stopping')\n")
            << std::flush;
  if (log) log->check();
  return all_answered ? 0 : 1;
}

}  // namespace polyhal
