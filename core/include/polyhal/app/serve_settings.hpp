#pragma once
/// @file serve_settings.hpp
/// `polyhal serve`'s config section `serve` (task inference): where it
/// listens, how requests are batched, and the limits that keep a hostile or
/// overloaded client from taking it down (docs/serving.md).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "polyhal/app/config.hpp"
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

struct ServeSettings {
  static constexpr const char* kSection = "serve";
  /// Loopback unless told otherwise: 0.0.0.0 or an address to expose it.
  std::string host = "127.0.0.1";
  int port = 8080;  ///< 0: any free port (said in the log and on stdout)
  /// A batch holds sequences up to this many real tokens in all (packed
  /// into batch.micro rows of model.seq_len; more rows are more model calls).
  std::int64_t max_batch_tokens = 16384;
  /// How long the first waiting request may wait for others to share its batch.
  double max_wait_ms = 2.0;
  /// Requests waiting or running at most; more are answered 429.
  std::int64_t max_queue = 256;
  std::int64_t max_body_bytes = 1 << 20;  ///< larger bodies are answered 413
  /// Texts per request; for question answering, windows of model.seq_len
  /// tokens the questions over the context make.
  std::int64_t max_inputs = 512;
  /// Texts longer than model.seq_len tokens: truncated (true) or refused 413.
  bool truncate = true;
  /// Seconds a client has to send its headers and body, and to read the answer.
  double timeout_seconds = 10.0;
  /// Copies of the model, each with a worker taking batches from the one
  /// queue. On a CPU each batch already runs on every thread (oneDNN), so
  /// replicas share the same cores; where the device has several chips,
  /// one per chip.
  std::int64_t replicas = 1;
  /// Connections open at once; more wait in the kernel's backlog.
  std::int64_t max_connections = 512;
  /// A file holding the bearer token every request but /health must carry
  /// (Authorization: Bearer TOKEN); empty: no token.
  std::filesystem::path api_key_file;
  /// The model's name in answers and /v1/models; empty: the model directory's
  /// name, else the preset's.
  std::string model_name;
  /// The Host header values (lower case, without the port) requests may
  /// carry; "*" allows any. Empty: on a loopback address, localhost and
  /// loopback addresses only, so a web page cannot reach the server by DNS
  /// rebinding; on any other address, any.
  std::vector<std::string> allowed_hosts;
  /// The web origins ("https://app.example.com", or "*" for any) whose pages
  /// may call the server from a browser (CORS: preflight answered, the
  /// Access-Control-Allow-Origin header sent). Empty: CORS off, no header.
  std::vector<std::string> cors_allow_origins;
  /// More model directories served beside model.dir by the same process
  /// (infinity's repeated --model-id), each read as model.dir would be and
  /// named by its directory; a request's "model" picks one, else the first
  /// of the kind its route needs.
  std::vector<std::filesystem::path> models;
};

/// The `serve` section of an inference config (its defaults when the file
/// has none; the inference task's schema declares it).
inline const ServeSettings& serve_settings(const RunConfig& config) {
  return config.section<ServeSettings>();
}

}  // namespace polyhal
