#include "serve/http_server.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "polyhal/app/serve_api.hpp"
#include "polyhal/error.hpp"
#include "serve/openapi.hpp"

namespace polyhal::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

/// Equal strings, in time that does not depend on where they differ.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string_view text(beast::string_view view) {
  return {view.data(), view.size()};
}

std::string lower_case(std::string_view value) {
  std::string out(value);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimmed(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return value;
}

/// A Content-Type's media type, lower-cased, without its parameters
/// ("Application/JSON; charset=utf-8" -> "application/json"): media types
/// are case-insensitive (RFC 9110, 8.3.1).
std::string media_type(std::string_view content_type) {
  return lower_case(trimmed(content_type.substr(0, content_type.find(';'))));
}

const char* task_name(ServedModel::Task task) {
  switch (task) {
    case ServedModel::Task::embeddings:
      return "embeddings";
    case ServedModel::Task::classification:
      return "classification";
    case ServedModel::Task::sparse_embeddings:
      return "sparse_embeddings";
    case ServedModel::Task::question_answering:
      break;
  }
  return "question_answering";
}

std::string_view task_endpoints(ServedModel::Task task) {
  switch (task) {
    case ServedModel::Task::embeddings:
      return "POST /v1/embeddings or /embed (an embedding model)";
    case ServedModel::Task::classification:
      return "POST /predict or /rerank (a classifier or cross-encoder)";
    case ServedModel::Task::sparse_embeddings:
      return "POST /embed_sparse (a SPLADE model)";
    case ServedModel::Task::question_answering:
      break;
  }
  return "POST /v1/question-answering (a question-answering model)";
}

/// The request line and headers together.
constexpr std::size_t kHeaderLimit = 16 * 1024;
/// Unparsed bytes a connection may hold: the header limit and room for one
/// chunk header or trailer section, all well under Beast's 64 KB field limit.
constexpr std::size_t kReadBufferLimit = 32 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, ServerState& state, net::thread_pool& prepare, bool over_capacity)
      : stream_(std::move(socket)),
        state_(state),
        prepare_(prepare),
        over_capacity_(over_capacity) {
    ++state_.metrics.connections;
  }
  ~Session() { --state_.metrics.connections; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->over_capacity_) {
        self->keep_alive_ = false;
        self->endpoint_ = "-";
        self->started_ = Clock::now();
        ++self->state_.metrics.in_flight;
        self->reply_error(503, "the server has serve.max_connections connections open; retry",
                          false);
        return;
      }
      self->read();
    });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(static_cast<std::uint64_t>(state_.settings.max_body_bytes));
    parser_->header_limit(kHeaderLimit);
    stream_.expires_after(timeout());
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  std::chrono::steady_clock::duration timeout() const {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(state_.settings.timeout_seconds));
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::eof) {
      close();
      return;
    }
    started_ = Clock::now();
    ++state_.metrics.in_flight;
    keep_alive_ = false;
    endpoint_ = "-";
    if (ec == http::error::body_limit) {
      reply_error(413,
                  fmt::format("the body is larger than serve.max_body_bytes ({} bytes)",
                              state_.settings.max_body_bytes),
                  false);
      return;
    }
    if (ec == http::error::buffer_overflow || ec == http::error::header_limit) {
      reply_error(
          431,
          fmt::format("the headers, a chunk header with its extensions, or the trailer "
                      "are longer than this server reads ({} KB)",
                      (ec == http::error::header_limit ? kHeaderLimit : kReadBufferLimit) / 1024),
          false);
      return;
    }
    if (ec) {
      reply_error(400, fmt::format("not an HTTP/1.1 request: {}", ec.message()), false);
      return;
    }
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive() && !state_.draining;
    try {
      handle();
    } catch (const std::exception& e) {  // never the server: this request fails
      keep_alive_ = false;
      reply_error(500, fmt::format("the server failed on this request: {}", e.what()),
                  tei_endpoint(endpoint_));
    }
  }

  /// One endpoint: its path and method, whether it asks for the token, the
  /// kind of model that answers it (none: any model), its API's error shape,
  /// and its handler. A handler with a task parses and tokenizes a body: it
  /// runs on the preparation pool; the others answer on the I/O thread.
  struct Route {
    std::string_view path;
    http::verb method;
    bool token;
    std::optional<ServedModel::Task> task;
    bool tei;  ///< text-embeddings-inference's error shape, else OpenAI's
    void (Session::*handler)();
    /// A body read on the preparation pool by any kind of model (no task).
    bool any_model = false;
  };

  static const Route* route_of(std::string_view path) {
    using Task = ServedModel::Task;
    static const Route kRoutes[] = {
        {"/health", http::verb::get, false, std::nullopt, false, &Session::health},
        {"/ready", http::verb::get, true, std::nullopt, false, &Session::ready},
        {"/v1/models", http::verb::get, true, std::nullopt, false, &Session::models},
        {"/metrics", http::verb::get, true, std::nullopt, false, &Session::metrics},
        {"/info", http::verb::get, true, std::nullopt, true, &Session::info},
        {"/openapi.json", http::verb::get, true, std::nullopt, false, &Session::openapi},
        {"/", http::verb::post, true, std::nullopt, true, &Session::root, true},
        {"/tokenize", http::verb::post, true, std::nullopt, true, &Session::tokenize, true},
        {"/decode", http::verb::post, true, std::nullopt, true, &Session::decode, true},
        {"/v1/embeddings", http::verb::post, true, Task::embeddings, false, &Session::openai_embed},
        // infinity's path for the same API.
        {"/embeddings", http::verb::post, true, Task::embeddings, false, &Session::openai_embed},
        {"/embed", http::verb::post, true, Task::embeddings, true, &Session::tei_embed},
        {"/embed_all", http::verb::post, true, Task::embeddings, true, &Session::embed_all},
        {"/embed_sparse", http::verb::post, true, Task::sparse_embeddings, true,
         &Session::embed_sparse},
        {"/similarity", http::verb::post, true, Task::embeddings, true, &Session::similarity},
        {"/predict", http::verb::post, true, Task::classification, true, &Session::predict},
        {"/rerank", http::verb::post, true, Task::classification, true, &Session::rerank},
        // Cohere's and Jina's paths (the body's "documents" picks their shape).
        {"/v1/rerank", http::verb::post, true, Task::classification, true, &Session::rerank},
        {"/v2/rerank", http::verb::post, true, Task::classification, true, &Session::rerank},
        {"/v1/question-answering", http::verb::post, true, Task::question_answering, false,
         &Session::answer_questions},
    };
    for (const auto& route : kRoutes)
      if (route.path == path) return &route;
    return nullptr;
  }

  static bool tei_endpoint(std::string_view path) {
    const Route* route = route_of(path);
    return route && route->tei;
  }

  void handle() {
    const std::string target(text(request_.target()));
    const auto path = target.substr(0, target.find('?'));
    endpoint_ = path;
    served_ = nullptr;  // chosen again for each request of a connection
    const Route* route = route_of(path);
    const bool tei = route && route->tei;
    if (!host_allowed(text(request_[http::field::host])))
      return reply_error(403,
                         fmt::format("Host '{}' is not this server's name: add it to "
                                     "serve.allowed_hosts to answer it",
                                     std::string(text(request_[http::field::host]).substr(0, 80))),
                         tei);
    if (!route) endpoint_ = "other";
    cors_origin_ = cors_origin(text(request_[http::field::origin]));
    // A browser's preflight carries no token: answered before the token check.
    if (request_.method() == http::verb::options && route && !cors_origin_.empty())
      return preflight(*route);
    // The token before the route: without it a client learns nothing, not
    // even which paths exist.
    if ((!route || route->token) && !state_.api_key.empty() &&
        !bearer_matches(text(request_[http::field::authorization])))
      return reply_error(401, "send the token: Authorization: Bearer TOKEN (serve.api_key_file)",
                         tei, {{"WWW-Authenticate", "Bearer"}});
    if (!route)
      return reply_error(
          404, fmt::format("no endpoint {}: this server answers {}", path, served_endpoints()),
          false);
    if (request_.method() != route->method) {
      const char* allow = route->method == http::verb::get ? "GET" : "POST";
      return reply_error(405, fmt::format("{} answers {} only", path, allow), tei,
                         {{"Allow", allow}});
    }
    if (!route->task && !route->any_model) return (this->*route->handler)();
    // As text-embeddings-inference: 424 for an endpoint of another kind of model.
    if (route->task && !serves(*route->task))
      return reply_error(424,
                         fmt::format("{} needs another kind of model: this server answers {}", path,
                                     served_endpoints()),
                         tei);
    if (state_.draining) return reply_error(503, "draining: the server is stopping", tei);
    const std::string_view type = text(request_[http::field::content_type]);
    if (media_type(type) != "application/json")
      return reply_error(415,
                         fmt::format("Content-Type is '{}': send application/json",
                                     std::string(type.substr(0, 80))),
                         tei);
    // Parsing and tokenizing a body can take long (a long /rerank query, a
    // long question-answering context): they run on the preparation pool,
    // so the I/O threads stay free for every other connection and /health
    // always answers. No read is pending meanwhile: request_ is this
    // request's alone until it is answered.
    net::post(prepare_, [self = shared_from_this(), route] { self->prepare(*route); });
  }

  void health() { reply(200, R"({"status":"ok"})"); }

  void ready() {
    if (state_.draining) return reply_error(503, "draining: the server is stopping", false);
    if (!state_.ready) return reply_error(503, "the model is still warming up", false);
    reply(200, R"({"status":"ready"})");
  }

  void models() {
    nlohmann::json data = nlohmann::json::array();
    for (const ServedEntry& entry : state_.models)
      data.push_back({{"id", entry.name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "polyhal"},
                      {"task", task_name(entry.model.task())}});
    reply(200, nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump());
  }

  void metrics() { reply(200, state_.metrics.text(), "text/plain; version=0.0.4"); }

  void openapi() { reply(200, openapi_document()); }

  /// text-embeddings-inference's GET /info: what the model is and the limits.
  void info() {
    using Task = ServedModel::Task;
    const auto& model = served().model;
    nlohmann::json type;
    if (model.task() == Task::embeddings) {
      // The description starts "embeddings: <mode> pooling".
      const std::string& d = model.description();
      const auto from = d.find(": ") == std::string::npos ? 0 : d.find(": ") + 2;
      type["embedding"] = {{"pooling", d.substr(from, d.find(' ', from) - from)},
                           {"dimensions", model.dimensions()}};
    } else if (model.task() == Task::sparse_embeddings) {
      type["embedding"] = {{"pooling", "splade"}, {"dimensions", model.dimensions()}};
    } else if (model.task() == Task::classification) {
      nlohmann::json labels = nlohmann::json::object();
      for (std::size_t i = 0; i < model.labels().size(); ++i)
        labels[std::to_string(i)] = model.labels()[i];
      type[model.dimensions() == 1 ? "reranker" : "classifier"] = {{"id2label", labels}};
    } else {
      type["question_answering"] = nlohmann::json::object();
    }
    nlohmann::json out{{"model_id", served().name},
                       {"model_type", type},
                       {"max_input_length", model.max_tokens()},
                       {"max_batch_tokens", state_.settings.max_batch_tokens},
                       {"max_client_batch_size", state_.settings.max_inputs},
                       {"max_concurrent_requests", state_.settings.max_queue},
                       {"auto_truncate", state_.settings.truncate},
                       {"prompts", served().prompts},
                       {"description", model.description()}};
    if (!served().default_prompt_name.empty())
      out["default_prompt_name"] = served().default_prompt_name;
    reply(200, out.dump());
  }

  /// TEI's POST /tokenize: each input's tokens with their ids, whether
  /// special, and their [start, stop) in bytes of the (prompted) text.
  void tokenize() {
    const TokenizeRequest parsed = parse_tei_tokenize(request_.body(), limits());
    const std::string& prompt = prompt_text(parsed.prompt_name);
    const Tokenizer& tokenizer = served().model.tokenizer();
    const std::size_t framing = served().model.frame({}).ids.size();
    nlohmann::json out = nlohmann::json::array();
    for (const auto& input : parsed.inputs) {
      const std::string text = prompt + input;
      // Room for every token and the frame: no cut, no padding.
      const auto length = static_cast<std::int64_t>(tokenizer.ids(text).size() + framing);
      const Encoding e = tokenizer.encode(text, std::nullopt, length);
      nlohmann::json tokens = nlohmann::json::array();
      for (std::size_t t = 0; t < e.input_ids.size(); ++t) {
        // A vocab.txt tracks no sequence ids: it frames [CLS] text [SEP].
        const bool special =
            e.sequence_ids.empty() ? t == 0 || t + 1 == e.input_ids.size() : e.sequence_ids[t] < 0;
        if (special && !parsed.add_special_tokens) continue;
        nlohmann::json token{{"id", e.input_ids[t]}, {"special", special}};
        if (!e.offsets.empty() && !special) {
          const auto [start, stop] = e.offsets[t];
          token["start"] = start;
          token["stop"] = stop;
          token["text"] = text.substr(start, stop - start);
        } else {
          token["start"] = nullptr;  // a vocab.txt tokenizer tracks no offsets
          token["stop"] = nullptr;
          token["text"] = e.tokens.at(t);
        }
        tokens.push_back(std::move(token));
      }
      out.push_back(std::move(tokens));
    }
    reply_from_pool(200, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  /// TEI's POST /decode: ids back to text, special tokens left out.
  void decode() {
    const Tokenizer& tokenizer = served().model.tokenizer();
    const DecodeRequest parsed =
        parse_tei_decode(request_.body(), limits(), tokenizer.vocab_size());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ids : parsed.ids) out.push_back(tokenizer.decode(ids));
    reply_from_pool(200, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  void openai_embed() { embed(false); }
  void tei_embed() { embed(true); }

  /// TEI's POST /: the route of this kind of model the body is for.
  void root() {
    switch (served().model.task()) {
      case ServedModel::Task::embeddings:
        return tei_root_route(request_.body(), false) == "/similarity" ? similarity() : embed(true);
      case ServedModel::Task::classification:
        return tei_root_route(request_.body(), true) == "/rerank" ? rerank() : predict();
      case ServedModel::Task::sparse_embeddings:
        return embed_sparse();
      case ServedModel::Task::question_answering:
        break;
    }
    answer_questions();
  }

  /// TEI's /embed_sparse: a SPLADE model's vocabulary weights above zero.
  void embed_sparse() {
    const EmbedRequest parsed = parse_tei_embed_sparse(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    const std::string& prompt = prompt_text(parsed.prompt_name);
    std::vector<ServedModel::Text> texts;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i)
      texts.push_back(single(prompt + parsed.inputs[i], truncate, parsed.truncate_left, i));
    run_model(std::move(texts), true,
              [](std::vector<std::vector<float>> out) { return tei_embed_sparse_answer(out); });
  }

  /// TEI's /embed_all: the encoder's vector of every token.
  void embed_all() {
    const EmbedRequest parsed = parse_tei_embed_all(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    const std::string& prompt = prompt_text(parsed.prompt_name);
    std::vector<ServedModel::Text> texts;
    std::int64_t tokens_in = 0;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i) {
      texts.push_back(single(prompt + parsed.inputs[i], truncate, parsed.truncate_left, i));
      tokens_in += static_cast<std::int64_t>(texts.back().ids.size());
    }
    // The answer is tokens x hidden numbers: bound it as a batch is bounded.
    if (tokens_in > state_.settings.max_batch_tokens)
      throw ApiError(413, fmt::format("/embed_all answers at most {} tokens a request "
                                      "(serve.max_batch_tokens); this one has {}: send fewer "
                                      "inputs a request",
                                      state_.settings.max_batch_tokens, tokens_in));
    const auto hidden = static_cast<std::size_t>(served().model.dimensions());
    run_model(
        std::move(texts), true,
        [hidden](std::vector<std::vector<float>> out) { return tei_embed_all_answer(out, hidden); },
        ServedModel::Output::tokens);
  }

  /// On a preparation thread: the request becomes a model job, or its error.
  void prepare(const Route& route) {
    const bool tei = route.tei;
    try {
      served_ = &choose(route);
      (this->*route.handler)();
    } catch (const ApiError& e) {
      reply_error_from_pool(e.status(), e.what(), tei);
    } catch (const std::exception& e) {  // never the server: this request fails
      reply_error_from_pool(500, fmt::format("the server failed on this request: {}", e.what()),
                            tei, {}, /*close=*/true);
    }
  }

  /// Answers with an error from a preparation thread: on the session's
  /// strand; `close` ends the connection after it (a request that failed
  /// in the server, not in its body).
  void reply_error_from_pool(int status, std::string message, bool tei,
                             std::vector<std::pair<const char*, const char*>> headers = {},
                             bool close = false) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), status, message = std::move(message), tei,
               headers = std::move(headers), close]() mutable {
                if (close) self->keep_alive_ = false;
                self->reply_error(status, message, tei, std::move(headers));
              });
  }

  /// Answers `body` from a preparation thread, on the session's strand.
  void reply_from_pool(int status, std::string body) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), status, body = std::move(body)]() mutable {
                self->reply(status, std::move(body));
              });
  }

  /// The model this request is for (set on the preparation pool before its
  /// handler runs); the first model for the routes that name none.
  const ServedEntry& served() const { return served_ ? *served_ : state_.models.front(); }

  bool serves(ServedModel::Task task) const {
    return std::any_of(state_.models.begin(), state_.models.end(),
                       [&](const ServedEntry& e) { return e.model.task() == task; });
  }

  std::string served_endpoints() const {
    std::vector<std::string> all;
    for (const auto task :
         {ServedModel::Task::embeddings, ServedModel::Task::classification,
          ServedModel::Task::question_answering, ServedModel::Task::sparse_embeddings})
      if (serves(task)) all.emplace_back(task_endpoints(task));
    return fmt::format("{}", fmt::join(all, "; "));
  }

  /// The model the body's "model" names, else the first of the kind the
  /// route needs. With one model served any name is answered (as TEI and
  /// infinity with one model); with several, an unknown name is a 404 that
  /// lists them, a model of another kind a 424.
  const ServedEntry& choose(const Route& route) const {
    const auto& models = state_.models;
    if (models.size() == 1) return models.front();
    const std::string wanted = requested_model(request_.body());
    const auto fits = [&](const ServedEntry& e) {
      return !route.task || e.model.task() == *route.task;
    };
    if (wanted.empty()) {
      for (const auto& e : models)
        if (fits(e)) return e;
      return models.front();
    }
    for (const auto& e : models) {
      if (e.name != wanted) continue;
      if (!fits(e))
        throw ApiError(424, fmt::format("model '{}' answers {}, not {}", wanted,
                                        task_endpoints(e.model.task()), route.path));
      return e;
    }
    std::vector<std::string> names;
    for (const auto& e : models) names.push_back(e.name);
    throw ApiError(404,
                   fmt::format("model '{}' is not served here; these are: {} (GET /v1/models)",
                               std::string_view(wanted).substr(0, 80), fmt::join(names, ", ")));
  }

  /// The Access-Control-Allow-Origin value for a request from `origin`:
  /// empty (no header) unless serve.cors_allow_origins lists it or "*".
  std::string cors_origin(std::string_view origin) const {
    const auto& allowed = state_.settings.cors_allow_origins;
    if (allowed.empty() || origin.empty() || origin.size() > 256) return {};
    std::string lower(origin);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& a : allowed) {
      if (a == "*") return "*";
      if (a == lower) return std::string(origin);
    }
    return {};
  }

  /// CORS preflight (OPTIONS with Origin): what the route lets a page send.
  void preflight(const Route& route) {
    reply(204, "", "text/plain",
          {{"Access-Control-Allow-Methods", route.method == http::verb::get ? "GET" : "POST"},
           {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
           {"Access-Control-Max-Age", "600"}});
  }

  /// Whether an Authorization value carries the server's token. The scheme
  /// is case-insensitive (RFC 9110, 11.1: "bearer" is "Bearer"); the token
  /// is compared in constant time.
  bool bearer_matches(std::string_view authorization) const {
    const auto space = authorization.find(' ');
    if (space == std::string_view::npos) return false;
    return lower_case(authorization.substr(0, space)) == "bearer" &&
           same_secret(trimmed(authorization.substr(space + 1)), state_.api_key);
  }

  /// Whether a request naming `header` as its Host is answered. A web page
  /// can make a browser send requests to a loopback server through a name
  /// it controls (DNS rebinding), but not with a loopback Host: on loopback,
  /// only localhost and loopback addresses are answered by default.
  bool host_allowed(std::string_view header) const {
    if (header.empty()) return true;  // HTTP/1.0 without Host: no browser sends that
    std::string host = lower_case(header.substr(0, 256));
    if (host.starts_with('[')) {
      host = host.substr(0, host.find(']') + 1);  // [::1]:8080 -> [::1]
    } else if (host.find(':') == host.rfind(':') && host.find(':') != std::string::npos) {
      host = host.substr(0, host.find(':'));  // localhost:8080 -> localhost
    }
    const auto& allowed = state_.settings.allowed_hosts;
    if (!allowed.empty())
      return std::find(allowed.begin(), allowed.end(), "*") != allowed.end() ||
             std::find(allowed.begin(), allowed.end(), host) != allowed.end();
    if (!state_.loopback) return true;
    if (host == "localhost" || host.ends_with(".localhost")) return true;
    beast::error_code ec;
    const std::string literal =
        host.starts_with('[') ? host.substr(1, host.size() > 2 ? host.size() - 2 : 0) : host;
    const auto address = net::ip::make_address(literal, ec);
    return !ec && address.is_loopback();
  }

  const ApiLimits limits() const {
    return {state_.settings.max_inputs, served().model.dimensions()};
  }

  /// `pair`'s tokens; ApiError 413 when they do not fit and truncation is off.
  ServedModel::Text tokens(const TextPair& pair, bool truncate, std::size_t index) const {
    return fitting(served().model.tokenize(pair.a, pair.b), truncate, index);
  }

  /// One text's tokens, cut at its start when `keep_end` (TEI's
  /// truncation_direction "Left"), else as tokens() cuts it.
  ServedModel::Text single(const std::string& text, bool truncate, bool keep_end,
                           std::size_t index) const {
    if (!keep_end) return tokens({text, std::nullopt}, truncate, index);
    return fitting(served().model.tokenize_keeping_end(text), truncate, index);
  }

  /// `out`, or ApiError 413 when it lost tokens and truncation is off.
  ServedModel::Text fitting(ServedModel::Text out, bool truncate, std::size_t index) const {
    if (out.truncated && !truncate)
      throw ApiError(413, fmt::format("input {} has more than {} tokens (model.seq_len); "
                                      "shorten it or send truncate: true",
                                      index, served().model.max_tokens()));
    return out;
  }

  /// Queues `texts` for the model; `answer` makes the body from its outputs
  /// (on a worker thread; an exception there is this request's 500).
  void run_model(std::vector<ServedModel::Text> texts, bool tei,
                 std::function<std::string(std::vector<std::vector<float>>)> answer,
                 ServedModel::Output output = ServedModel::Output::head) {
    BatchJob job;
    job.texts = std::move(texts);
    job.output = output;
    job.model = served().index;
    job.done = [self = shared_from_this(), tei, answer = std::move(answer)](
                   std::vector<std::vector<float>> outputs, std::string error) {
      std::string body;
      if (error.empty()) {
        try {
          body = answer(std::move(outputs));
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      net::post(self->stream_.get_executor(), [self, body = std::move(body), error, tei] {
        if (!error.empty()) return self->reply_error(500, "the model failed: " + error, tei);
        self->reply(200, body);
      });
    };
    if (!state_.batcher.submit(std::move(job)))
      reply_error_from_pool(state_.draining ? 503 : 429,
                            state_.draining ? "draining: the server is stopping"
                                            : "the queue is full (serve.max_queue): retry shortly",
                            tei, {{"Retry-After", "1"}});
  }

  void embed(bool tei) {
    const EmbedRequest parsed = tei ? parse_tei_embed(request_.body(), limits())
                                    : parse_openai_embeddings(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    const std::string& prompt = prompt_text(parsed.prompt_name);
    std::vector<ServedModel::Text> texts;
    std::int64_t tokens_in = 0;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i) {
      texts.push_back(single(prompt + parsed.inputs[i], truncate, parsed.truncate_left, i));
      tokens_in += static_cast<std::int64_t>(texts.back().ids.size());
    }
    const EmbeddingEncoding encoding = parsed.encoding;
    const bool normalize = parsed.normalize.value_or(served().model.normalizes());
    const auto dimensions = static_cast<std::size_t>(parsed.dimensions);
    run_model(std::move(texts), tei,
              [this, tei, encoding, normalize, dimensions,
               tokens_in](std::vector<std::vector<float>> out) {
                if (dimensions > 0)  // Matryoshka: the first ones, then normalised
                  for (auto& e : out) e.resize(std::min(dimensions, e.size()));
                if (normalize)
                  for (auto& e : out) l2_normalize(e);
                return tei ? tei_embed_answer(out)
                           : openai_embeddings_answer(out, encoding, served().name, tokens_in);
              });
  }

  /// TEI's /similarity: each sentence's cosine similarity to the source,
  /// all embedded in one batch.
  void similarity() {
    const SimilarityRequest parsed = parse_tei_similarity(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    const std::string& prompt = prompt_text(parsed.prompt_name);
    std::vector<ServedModel::Text> texts;
    texts.push_back(single(prompt + parsed.source, truncate, parsed.truncate_left, 0));
    for (std::size_t i = 0; i < parsed.sentences.size(); ++i)
      texts.push_back(single(prompt + parsed.sentences[i], truncate, parsed.truncate_left, i + 1));
    run_model(std::move(texts), true, [](std::vector<std::vector<float>> out) {
      for (auto& e : out) l2_normalize(e);
      nlohmann::json scores = nlohmann::json::array();
      for (std::size_t i = 1; i < out.size(); ++i) {
        double dot = 0;
        for (std::size_t c = 0; c < out[0].size(); ++c)
          dot += static_cast<double>(out[0][c]) * out[i][c];
        scores.push_back(static_cast<float>(dot));
      }
      return scores.dump();
    });
  }

  /// The text put before each input: the named prompt, or the model's
  /// default one (sentence-transformers' default_prompt_name), or none.
  const std::string& prompt_text(const std::string& requested) const {
    static const std::string none;
    const std::string& name = requested.empty() ? served().default_prompt_name : requested;
    if (name.empty()) return none;
    const auto it = served().prompts.find(name);
    if (it != served().prompts.end()) return it->second;
    std::vector<std::string> names;
    for (const auto& [known, text] : served().prompts)
      names.push_back(nlohmann::json(known).dump());
    throw ApiError(400, fmt::format("'prompt_name' {}: {}", nlohmann::json(name).dump(),
                                    names.empty() ? "this model has no prompts "
                                                    "(config_sentence_transformers.json)"
                                                  : fmt::format("this model's prompts are {}",
                                                                fmt::join(names, ", "))));
  }

  void predict() {
    const PredictRequest parsed = parse_tei_predict(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    std::vector<ServedModel::Text> texts;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i)
      texts.push_back(tokens(parsed.inputs[i], truncate, i));
    const bool raw = parsed.raw_scores || parsed.function_none, batch = parsed.batch;
    const bool independent = parsed.independent.value_or(served().model.independent_labels());
    const std::int64_t top_k = parsed.top_k;
    run_model(std::move(texts), true,
              [this, raw, batch, independent, top_k](std::vector<std::vector<float>> out) {
                for (auto& logits : out) logits = label_scores(logits, independent, raw);
                return tei_predict_answer(out, served().model.labels(), batch, top_k);
              });
  }

  void rerank() {
    if (served().model.dimensions() != 1)
      throw ApiError(424, fmt::format("/rerank needs a cross-encoder with one score "
                                      "(num_labels 1); this classifier has {} labels: use "
                                      "/predict",
                                      served().model.dimensions()));
    auto parsed = std::make_shared<RerankRequest>(parse_tei_rerank(request_.body(), limits()));
    const bool truncate = parsed->truncate.value_or(state_.settings.truncate);
    // The query is tokenized once and framed with each text (tokenized once each).
    const std::vector<std::int32_t> query = served().model.text_ids(parsed->query);
    std::vector<ServedModel::Text> texts;
    std::int64_t tokens_in = 0;
    for (std::size_t i = 0; i < parsed->texts.size(); ++i) {
      texts.push_back(fitting(
          served().model.frame(query, served().model.text_ids(parsed->texts[i])), truncate, i));
      tokens_in += static_cast<std::int64_t>(texts.back().ids.size());
    }
    run_model(std::move(texts), true,
              [this, parsed, tokens_in](std::vector<std::vector<float>> out) {
                std::vector<float> scores;
                for (const auto& logits : out)
                  scores.push_back(label_scores(logits, true, parsed->raw_scores).at(0));
                return rerank_answer(scores, *parsed, served().name, tokens_in);
              });
  }

  void answer_questions() {
    auto parsed =
        std::make_shared<QuestionRequest>(parse_question_answering(request_.body(), limits()));
    // The windows are counted before any is built: the work is bounded by
    // serve.max_inputs, not by the context's length.
    auto questions = std::make_shared<ServedQuestions>(
        question_features(parsed->questions, parsed->context, served().model.tokenizer(),
                          served().model.max_tokens(), state_.settings.max_inputs));
    std::vector<ServedModel::Text> texts;
    for (const auto& feature : questions->features.features) {
      ServedModel::Text& t = texts.emplace_back();
      for (std::size_t k = 0; k < feature.input_ids.size() && feature.attention_mask[k] != 0; ++k) {
        t.ids.push_back(feature.input_ids[k]);
        t.types.push_back(feature.token_type_ids[k]);
      }
    }
    run_model(
        std::move(texts), false, [this, parsed, questions](std::vector<std::vector<float>> out) {
          return question_answering_answer(
              served_answers(*questions, out, served().model.tokenizer(),
                             served().model.max_tokens(), parsed->top_k, parsed->max_answer_length),
              *parsed);
        });
  }

  void reply(int status, std::string body, const char* type = "application/json",
             std::vector<std::pair<const char*, const char*>> headers = {}) {
    auto response = std::make_shared<Response>(static_cast<http::status>(status), 11);
    response->set(http::field::server, "polyhal");
    response->set(http::field::content_type, type);
    for (const auto& [name, value] : headers) response->set(name, value);
    if (!cors_origin_.empty()) {
      response->set(http::field::access_control_allow_origin, cors_origin_);
      response->set(http::field::vary, "Origin");
    }
    response->keep_alive(keep_alive_ && !state_.draining);
    response->body() = std::move(body);
    response->prepare_payload();
    state_.metrics.answered(endpoint_, status,
                            std::chrono::duration<double>(Clock::now() - started_).count());
    stream_.expires_after(timeout());
    http::async_write(stream_, *response,
                      [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
                        --self->state_.metrics.in_flight;
                        if (ec || !response->keep_alive()) return self->close();
                        self->read();
                      });
  }

  void reply_error(int status, const std::string& message, bool tei,
                   std::vector<std::pair<const char*, const char*>> headers = {}) {
    if (status >= 500 || status == 429)
      spdlog::warn("serve: {} {}: {}", status, endpoint_, message);
    else
      spdlog::debug("serve: {} {}: {}", status, endpoint_, message);
    reply(status, tei ? tei_error_body(status, message) : openai_error_body(status, message),
          "application/json", std::move(headers));
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  ServerState& state_;
  net::thread_pool& prepare_;
  bool over_capacity_;
  // Bounded: the parser needs a whole line (a chunk header with its
  // extensions) or a whole trailer section in the buffer at once, and
  // Beast's header limit does not cover trailers; past this bound a read
  // fails (buffer_overflow, answered 400) instead of growing without end, and
  // no field reaches Beast's 64 KB field size, which throws.
  beast::flat_buffer buffer_{kReadBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  bool keep_alive_ = false;
  std::string endpoint_;
  std::string cors_origin_;              ///< this request's Access-Control-Allow-Origin, if any
  const ServedEntry* served_ = nullptr;  ///< this request's model (choose())
  Clock::time_point started_;
};

/// Runs the I/O context until it stops. An exception out of a handler (one
/// Beast or Asio throws inside a read or write, or one of ours) unwinds only
/// that handler: the session it held is released, which closes its
/// connection, and the thread goes back to serving the others.
void run_io(net::io_context& io, ServeMetrics& metrics) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      ++metrics.connection_failures;
      spdlog::warn("serve: a connection ended on a fault of its own: {}", e.what());
    } catch (...) {
      ++metrics.connection_failures;
      spdlog::warn("serve: a connection ended on a fault of its own");
    }
  }
}

}  // namespace

struct HttpServer::Impl {
  ServerState& state;
  net::io_context io;
  tcp::acceptor acceptor{io};
  /// Parses and tokenizes request bodies off the I/O threads (declared after
  /// io: joined before it goes). Bounded: one job per open connection at most.
  net::thread_pool prepare{preparation_threads()};

  explicit Impl(ServerState& s) : state(s) {}

  static std::size_t preparation_threads() {
    return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
  }

  /// Waits before accepting again after a failed accept.
  net::steady_timer accept_pause{io};
  Clock::time_point last_accept_warning{};

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted) return;
        // Out of descriptors (EMFILE, ENFILE) or another failure: the
        // pending connection stays in the kernel's queue, so accepting at
        // once would fail again and spin. Back off, count it, and warn at
        // most once a second.
        ++state.metrics.accept_failures;
        if (Clock::now() - last_accept_warning > std::chrono::seconds(1)) {
          last_accept_warning = Clock::now();
          spdlog::warn("serve: accept failed: {} ({} so far; retrying in 50 ms)", ec.message(),
                       state.metrics.accept_failures.load());
        }
        accept_pause.expires_after(std::chrono::milliseconds(50));
        accept_pause.async_wait([this](beast::error_code waited) {
          if (!waited && acceptor.is_open()) accept();
        });
        return;
      }
      const bool over = state.metrics.connections.load() >= state.settings.max_connections;
      std::make_shared<Session>(std::move(socket), state, prepare, over)->start();
      accept();
    });
  }
};

HttpServer::HttpServer(ServerState& state) : impl_(std::make_unique<Impl>(state)) {}
HttpServer::~HttpServer() = default;

BoundPort::BoundPort(const ServeSettings& s, const std::string& where_set) {
  beast::error_code ec;
  const auto address = net::ip::make_address(s.host, ec);
  if (ec)
    throw ConfigError(
        fmt::format("key 'serve.host': '{}' is not an IP address (127.0.0.1, ::1, "
                    "0.0.0.0)",
                    s.host));
  const tcp::endpoint where(address, static_cast<unsigned short>(s.port));
  ipv6_ = address.is_v6();
  loopback_ = address.is_loopback();
  fd_ = ::socket(ipv6_ ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  const bool ok = fd_ >= 0 && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
                  ::bind(fd_, where.data(), static_cast<socklen_t>(where.size())) == 0 &&
                  ::listen(fd_, SOMAXCONN) == 0;
  if (ok) return;
  const int error = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (error == EADDRINUSE || error == EACCES || error == EADDRNOTAVAIL)
    throw ConfigError(fmt::format(
        "{}: key 'serve.port': cannot listen on {}:{}: {}{}", where_set, s.host, s.port,
        std::strerror(error),
        error == EADDRINUSE ? " (another server has it: choose another port, or 0 for any)" : ""));
  throw Error(ExitCode::unavailable,
              fmt::format("serve: cannot listen on {}:{} (keys 'serve.host', 'serve.port'): {}",
                          s.host, s.port, std::strerror(error)));
}

BoundPort::~BoundPort() {
  if (fd_ >= 0) ::close(fd_);
}

int BoundPort::release() {
  return std::exchange(fd_, -1);
}

unsigned short HttpServer::listen(BoundPort& bound) {
  auto& m = *impl_;
  const bool ipv6 = bound.ipv6();
  m.state.loopback = bound.loopback();
  beast::error_code ec;
  const int fd = bound.release();
  m.acceptor.assign(ipv6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    throw Error(ExitCode::unavailable,
                fmt::format("serve: cannot serve on the bound port: {}", ec.message()));
  }
  return m.acceptor.local_endpoint().port();
}

bool HttpServer::run(int threads) {
  auto& m = *impl_;
  // A request waiting for its batch has no operation pending on the I/O
  // context: without the guard, run() would return once the acceptor closes
  // and the answers posted later would never be written.
  auto guard = net::make_work_guard(m.io);
  m.accept();
  net::signal_set signals(m.io, SIGINT, SIGTERM);
  std::thread drainer;
  std::atomic<bool> all_answered{true};
  signals.async_wait([&](beast::error_code ec, int signal) {
    if (ec) return;
    const double bound = m.state.settings.timeout_seconds;
    spdlog::info(
        "serve: {}: refusing new requests, answering the {} in flight (for {} s at most, "
        "serve.timeout_seconds; a second signal stops at once)",
        strsignal(signal), m.state.metrics.in_flight.load(), bound);
    m.state.draining = true;
    beast::error_code ignored;
    m.acceptor.close(ignored);
    // A second signal ends the process at once, as a user pressing Ctrl-C twice means.
    signals.async_wait([](beast::error_code again, int second) {
      if (again) return;
      std::fprintf(stderr, "polyhal serve: %s again: stopping now, without answering\n",
                   strsignal(second));
      std::fflush(nullptr);
      std::_Exit(128 + second);
    });
    drainer = std::thread([&, bound] {
      const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(bound));
      bool drained = m.state.batcher.drain_until(until);
      // Answers are written on the I/O threads: wait for them (bounded too).
      while (m.state.metrics.in_flight.load() > 0 && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!drained || m.state.metrics.in_flight.load() > 0) {
        all_answered = false;
        spdlog::warn(
            "serve: {} request(s) still unanswered after {} s (serve.timeout_seconds): "
            "stopping without them",
            m.state.metrics.in_flight.load(), bound);
        m.state.batcher.abandon();
      }
      m.io.stop();
    });
  });
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { run_io(m.io, m.state.metrics); });
  run_io(m.io, m.state.metrics);
  for (auto& t : pool) t.join();
  if (drainer.joinable()) drainer.join();
  m.prepare.join();  // a request still being prepared finds the batcher draining
  return all_answered;
}

}  // namespace polyhal::serve
