#pragma once
// `polyhal serve`'s HTTP/1.1 server on Boost.Beast (Debian's libboost-dev,
// the Boost polyhal already uses; header-only, asynchronous, with the
// parser limits and timeouts an exposed server needs). Routes:
//   POST /v1/embeddings         OpenAI embeddings API          (embedding model)
//   POST /embed                 text-embeddings-inference's    (embedding model)
//   POST /predict, /rerank      text-embeddings-inference's    (classifier, cross-encoder)
//   POST /v1/question-answering Hugging Face pipeline's shape  (question answering)
//   GET  /health                the process answers (no token needed)
//   GET  /ready                 the model is loaded and warm, and not draining
//   GET  /v1/models             the served models, OpenAI's list shape
//   GET  /metrics               Prometheus text (serve_metrics.hpp)
// A POST endpoint of another kind of model answers 424, as TEI does. The
// routes are one table (Session::route_of in http_server.cpp): path, method,
// token, the kind of model, error shape, handler. POST bodies are parsed and
// tokenized on a preparation pool, never on the I/O threads.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/app/request_batcher.hpp"
#include "polyhal/app/serve_metrics.hpp"
#include "polyhal/app/serve_settings.hpp"
#include "polyhal/app/served_model.hpp"

namespace polyhal::serve {

/// One served model: its first replica (tokenizer and what the model is;
/// all replicas are alike), its name in requests and answers, and its
/// config_sentence_transformers.json prompts (name: text put before an
/// input) and default_prompt_name, as sentence-transformers applies them.
struct ServedEntry {
  ServedModel& model;
  std::string name;
  std::size_t index = 0;  ///< its place in ServerState::models and the batcher
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
};

/// What every connection shares.
struct ServerState {
  /// The models, in the order given; a request names one by "model", else
  /// the first of the kind its route needs answers.
  std::vector<ServedEntry> models;
  const ServeSettings& settings;
  std::string api_key;  ///< empty: none required
  ServeMetrics metrics;
  RequestBatcher batcher;
  std::atomic<bool> ready{false}, draining{false};
  /// Listening on a loopback address (set by HttpServer::listen): then only
  /// local Host names are answered unless serve.allowed_hosts says more.
  bool loopback = false;
  /// `replicas[w][m]`: worker w's copy of model m; `entries` name them.
  ServerState(std::vector<ServedEntry> entries,
              const std::vector<std::vector<ServedModel*>>& replicas, const ServeSettings& s,
              std::string key)
      : models(std::move(entries)),
        settings(s),
        api_key(std::move(key)),
        batcher(replicas, s, metrics) {}
};

/// serve.host:serve.port bound and listening, before the model loads: a
/// port in use is said at once (a ConfigError naming the keys, exit 2),
/// not after minutes of loading. HttpServer::listen takes it over.
class BoundPort {
 public:
  /// `where`: where serve.port was set (the config's line, --port, PORT).
  BoundPort(const ServeSettings& settings, const std::string& where);
  ~BoundPort();
  BoundPort(const BoundPort&) = delete;
  BoundPort& operator=(const BoundPort&) = delete;
  /// The listening socket, now the caller's to close.
  int release();
  bool ipv6() const { return ipv6_; }
  bool loopback() const { return loopback_; }

 private:
  int fd_ = -1;
  bool ipv6_ = false, loopback_ = false;
};

class HttpServer {
 public:
  explicit HttpServer(ServerState& state);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Serves on `bound`'s socket; returns its port (serve.port 0: the one
  /// the kernel chose).
  unsigned short listen(BoundPort& bound);
  /// Serves on `threads` I/O threads until SIGINT or SIGTERM; then refuses
  /// new requests (503), answers those in flight for serve.timeout_seconds
  /// at most and returns whether every one was answered. A second signal
  /// ends the process at once (exit 128 + the signal).
  bool run(int threads);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polyhal::serve
