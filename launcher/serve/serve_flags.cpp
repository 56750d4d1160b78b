#include "serve/serve_flags.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

namespace po = boost::program_options;

// flag: the config key it sets.
constexpr std::pair<const char*, const char*> kServeFlags[] = {
    {"port", "serve.port"},
    {"host", "serve.host"},
    {"precision", "model.precision"},
    {"api-key-file", "serve.api_key_file"},
    {"max-batch-tokens", "serve.max_batch_tokens"},
    {"pooling", "inference.pooling"},
};

// text-embeddings-inference's environment variables (its container's
// settings) that mean the same here; read only without a config file.
constexpr std::pair<const char*, const char*> kTeiEnvironment[] = {
    {"PORT", "serve.port"},
    {"MAX_BATCH_TOKENS", "serve.max_batch_tokens"},
};

/// A YAML scalar of `text` as written: a path or a host with any
/// characters stays a string; a number stays a number for the key to check.
std::string yaml_scalar(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "0123456789abcdefghijklmnopqrstuvwxyz"
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ._-") == std::string::npos;
  return plain ? text : nlohmann::json(text).dump();
}

}  // namespace

po::options_description serve_flag_options() {
  po::options_description d("serve options (TEI's names; each sets a config key)");
  d.add_options()("port", po::value<std::string>()->value_name("PORT"),
                  "the TCP port (serve.port; default 8080)")(
      "host", po::value<std::string>()->value_name("ADDRESS"),
      "the address to listen on (serve.host; default 127.0.0.1)")(
      "precision", po::value<std::string>()->value_name("P"),
      "f32, bf16, f16, int8 or mixed (model.precision)")(
      "api-key-file", po::value<std::string>()->value_name("FILE"),
      "a file holding the bearer token requests must carry (serve.api_key_file)")(
      "max-batch-tokens", po::value<std::string>()->value_name("N"),
      "real tokens one batch holds at most (serve.max_batch_tokens)")(
      "pooling", po::value<std::string>()->value_name("MODE"),
      "mean, cls, max, or splade for a *ForMaskedLM model's /embed_sparse (inference.pooling; "
      "default: the model directory's)")(
      "model", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
      "a model directory to serve, repeatable (infinity's --model-id): the first is MODEL_DIR "
      "unless one is given, the others serve.models")(
      "cors-allow-origin", po::value<std::string>()->value_name("ORIGINS"),
      "web origins, comma-separated, whose pages may call the server (\"*\": any; "
      "serve.cors_allow_origins; default: CORS off)");
  return d;
}

void add_serve_overrides(const po::variables_map& vm, CommandLine& cl) {
  auto& run = cl.run;
  std::vector<std::string> overrides, origins;
  const auto add_yaml = [&](const std::string& key, const std::string& yaml, std::string origin) {
    overrides.push_back(key + "=" + yaml);
    origins.push_back(std::move(origin));
  };
  const auto add = [&](const std::string& key, const std::string& value, std::string origin) {
    add_yaml(key, yaml_scalar(value), std::move(origin));
  };
  std::string model_dir, model_origin;
  std::error_code error;
  std::vector<std::string> more_models;
  if (vm.count("model")) more_models = vm["model"].as<std::vector<std::string>>();
  if (run.config.empty() && !more_models.empty()) {  // --model A --model B: A is MODEL_DIR
    run.config = more_models.front();
    more_models.erase(more_models.begin());
  }
  if (!run.config.empty() && !std::filesystem::exists(run.config, error))
    throw UsageError(
        fmt::format("{}: neither a model directory nor a config file here (polyhal "
                    "serves a directory on this machine; it downloads nothing)",
                    run.config.string()));
  if (!run.config.empty() && std::filesystem::is_directory(run.config, error)) {
    model_dir = run.config.string();
    model_origin = "polyhal serve " + model_dir;
  } else if (const char* id = std::getenv("MODEL_ID"); run.config.empty() && id && *id) {
    model_dir = id;
    model_origin = fmt::format("MODEL_ID={} (environment)", id);
    if (!std::filesystem::is_directory(model_dir, error))
      throw UsageError(
          fmt::format("{}: not a directory: polyhal serves a model directory on this "
                      "machine (it downloads nothing)",
                      model_origin));
  }
  if (!model_dir.empty()) {
    run.config.clear();  // no config file: the overrides are the config
    const std::string made = "polyhal serve MODEL_DIR (its default)";
    add("backend", "cpu", made);
    add("task", "inference", made);
    add("model.dir", std::filesystem::absolute(model_dir).string(), model_origin);
    for (const auto& [variable, key] : kTeiEnvironment)
      if (const char* value = std::getenv(variable); value && *value)
        add(key, value, fmt::format("{}={} (environment)", variable, value));
  }
  for (const auto& [flag, key] : kServeFlags)
    if (vm.count(flag)) {
      const auto& value = vm[flag].as<std::string>();
      add(key, value, fmt::format("--{} {}", flag, value));
    }
  if (!more_models.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& dir : more_models) {
      if (!std::filesystem::is_directory(dir, error))
        throw UsageError(
            fmt::format("--model {}: not a directory: polyhal serves a model "
                        "directory on this machine (it downloads nothing)",
                        dir));
      list.push_back(std::filesystem::absolute(dir).string());
    }
    add_yaml("serve.models", list.dump(), fmt::format("--model {}", more_models.front()));
  }
  if (vm.count("cors-allow-origin")) {
    const auto& value = vm["cors-allow-origin"].as<std::string>();
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t at = 0; at <= value.size();) {
      const auto comma = std::min(value.find(',', at), value.size());
      if (comma > at) list.push_back(value.substr(at, comma - at));
      at = comma + 1;
    }
    add_yaml("serve.cors_allow_origins", list.dump(), "--cors-allow-origin " + value);
  }
  // --set last: it says what it says over everything else.
  for (std::size_t i = 0; i < run.overrides.size(); ++i) {
    overrides.push_back(run.overrides[i]);
    origins.push_back(i < run.override_origins.size() ? run.override_origins[i] : "");
  }
  run.overrides = std::move(overrides);
  run.override_origins = std::move(origins);
  cl.serve_model_dir = !model_dir.empty();
}

}  // namespace polyhal
