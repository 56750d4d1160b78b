// `polyhal serve CONFIG`: a text-inference config's model held open behind
// an HTTP server (docs/serving.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
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

std::string served_name(const RunConfig& config, const RunPlan& plan) {
  const auto& s = serve_settings(config);
  if (!s.model_name.empty()) return s.model_name;
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
  const OpenedRun opened = open_configured_run(cl.common, config, WorldShape{}, false);
  const auto& settings = serve_settings(config);
  // Bound before the model loads: a port in use is said now (exit 2).
  std::optional<serve::BoundPort> bound;
  if (!cl.serve_check) bound.emplace(settings, config.locate("serve.port"));
  Prompts prompts = read_prompts(config);
  const ServedTextOptions options = served_text_options(config);
  std::vector<std::unique_ptr<ServedModel>> replicas;
  for (std::int64_t i = 0; i < (cl.serve_check ? 1 : settings.replicas); ++i)
    replicas.push_back(
        std::make_unique<ServedModel>(opened.device(), config, opened.plan, options));
  ServedModel& model = *replicas.front();
  const std::string name = served_name(config, opened.plan);
  std::string key = read_api_key(config);
  // text-embeddings-inference's API_KEY, in the one-command form only.
  if (const char* env = std::getenv("API_KEY"); key.empty() && cl.serve_model_dir && env && *env)
    key = env;
  const std::string what =
      fmt::format("model {} ({}, {} tokens at most) on {} {}{}, batches of up to {} tokens", name,
                  model.description(), model.max_tokens(), config.backend, opened.device().name(),
                  settings.replicas > 1 ? fmt::format(" x {} replicas", settings.replicas) : "",
                  settings.max_batch_tokens);
  if (cl.serve_check) {
    std::cout << "ok: polyhal serve would serve " << what << " on " << settings.host << ":"
              << settings.port << (key.empty() ? "" : " (bearer token required)") << "\n";
    return 0;
  }
  std::vector<ServedModel*> models;
  for (auto& replica : replicas) models.push_back(replica.get());
  serve::ServerState state(models, settings, name, key);
  state.prompts = std::move(prompts.prompts);
  state.default_prompt_name = std::move(prompts.default_prompt_name);
  serve::HttpServer server(state);
  const unsigned short port = server.listen(*bound);
  for (auto* replica : models) warm_up(*replica);
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
