#include "serve/http_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "polyhal/app/serve_api.hpp"
#include "polyhal/error.hpp"

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

/// Which API's error shape an endpoint answers in.
bool tei_endpoint(std::string_view target) {
  return target == "/embed" || target == "/predict" || target == "/rerank";
}

/// The task each POST endpoint needs of the model.
struct PostEndpoint {
  std::string_view path;
  ServedModel::Task task;
};
constexpr PostEndpoint kPostEndpoints[] = {
    {"/v1/embeddings", ServedModel::Task::embeddings},
    {"/embed", ServedModel::Task::embeddings},
    {"/predict", ServedModel::Task::classification},
    {"/rerank", ServedModel::Task::classification},
    {"/v1/question-answering", ServedModel::Task::question_answering},
};

std::string_view task_endpoints(ServedModel::Task task) {
  switch (task) {
    case ServedModel::Task::embeddings:
      return "POST /v1/embeddings or /embed (an embedding model)";
    case ServedModel::Task::classification:
      return "POST /predict or /rerank (a classifier or cross-encoder)";
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
  Session(tcp::socket&& socket, ServerState& state, bool over_capacity)
      : stream_(std::move(socket)), state_(state), over_capacity_(over_capacity) {
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

  void handle() {
    const std::string target(text(request_.target()));
    const auto path = target.substr(0, target.find('?'));
    endpoint_ = path;
    const bool get = request_.method() == http::verb::get;
    const bool post = request_.method() == http::verb::post;
    const auto wrong_method = [&](const char* allow) {
      reply_error(405, fmt::format("{} answers {} only", path, allow), tei_endpoint(path),
                  {{"Allow", allow}});
    };
    if (path == "/health") return get ? reply(200, R"({"status":"ok"})") : wrong_method("GET");
    const PostEndpoint* post_endpoint = nullptr;
    for (const auto& e : kPostEndpoints)
      if (path == e.path) post_endpoint = &e;
    const bool known =
        post_endpoint || path == "/ready" || path == "/v1/models" || path == "/metrics";
    if (!known) {
      endpoint_ = "other";
      return reply_error(404,
                         fmt::format("no endpoint {}: this model answers {}", path,
                                     task_endpoints(state_.model.task())),
                         false);
    }
    if (!state_.api_key.empty() &&
        !same_secret(text(request_[http::field::authorization]), "Bearer " + state_.api_key))
      return reply_error(401, "send the token: Authorization: Bearer TOKEN (serve.api_key_file)",
                         tei_endpoint(path), {{"WWW-Authenticate", "Bearer"}});
    if (path == "/ready") {
      if (!get) return wrong_method("GET");
      if (state_.draining) return reply_error(503, "draining: the server is stopping", false);
      if (!state_.ready) return reply_error(503, "the model is still warming up", false);
      return reply(200, R"({"status":"ready"})");
    }
    if (path == "/v1/models") {
      if (!get) return wrong_method("GET");
      return reply(200, nlohmann::json{{"object", "list"},
                                       {"data",
                                        {{{"id", state_.model_name},
                                          {"object", "model"},
                                          {"created", 0},
                                          {"owned_by", "polyhal"}}}}}
                            .dump());
    }
    if (path == "/metrics") {
      if (!get) return wrong_method("GET");
      return reply(200, state_.metrics.text(), "text/plain; version=0.0.4");
    }
    if (!post) return wrong_method("POST");
    const bool tei = tei_endpoint(path);
    // As text-embeddings-inference: 424 for an endpoint of another kind of model.
    if (post_endpoint->task != state_.model.task())
      return reply_error(424,
                         fmt::format("{} needs another kind of model: this one answers {}", path,
                                     task_endpoints(state_.model.task())),
                         tei);
    if (state_.draining) return reply_error(503, "draining: the server is stopping", tei);
    const std::string_view type = text(request_[http::field::content_type]);
    if (type.substr(0, 16) != "application/json")
      return reply_error(415,
                         fmt::format("Content-Type is '{}': send application/json",
                                     std::string(type.substr(0, 80))),
                         tei);
    try {
      if (path == "/v1/embeddings" || path == "/embed") return embed(path == "/embed");
      if (path == "/predict") return predict();
      if (path == "/rerank") return rerank();
      return answer_questions();
    } catch (const ApiError& e) {
      return reply_error(e.status(), e.what(), tei);
    }
  }

  const ApiLimits limits() const { return {state_.settings.max_inputs, state_.model.dimensions()}; }

  /// `pair`'s tokens; ApiError 413 when they do not fit and truncation is off.
  ServedModel::Text tokens(const TextPair& pair, bool truncate, std::size_t index) const {
    ServedModel::Text out = state_.model.tokenize(pair.a, pair.b);
    if (out.truncated && !truncate)
      throw ApiError(413, fmt::format("input {} has more than {} tokens (model.seq_len); "
                                      "shorten it or send truncate: true",
                                      index, state_.model.max_tokens()));
    return out;
  }

  /// Queues `texts` for the model; `answer` makes the body from its outputs
  /// (on a worker thread; an exception there is this request's 500).
  void run_model(std::vector<ServedModel::Text> texts, bool tei,
                 std::function<std::string(std::vector<std::vector<float>>)> answer) {
    BatchJob job;
    job.texts = std::move(texts);
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
      reply_error(state_.draining ? 503 : 429,
                  state_.draining ? "draining: the server is stopping"
                                  : "the queue is full (serve.max_queue): retry shortly",
                  tei, {{"Retry-After", "1"}});
  }

  void embed(bool tei) {
    const EmbedRequest parsed = tei ? parse_tei_embed(request_.body(), limits())
                                    : parse_openai_embeddings(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    std::vector<ServedModel::Text> texts;
    std::int64_t tokens_in = 0;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i) {
      texts.push_back(tokens({parsed.inputs[i], std::nullopt}, truncate, i));
      tokens_in += static_cast<std::int64_t>(texts.back().ids.size());
    }
    const bool base64 = parsed.base64;
    const bool normalize = parsed.normalize.value_or(state_.model.normalizes());
    run_model(std::move(texts), tei,
              [this, tei, base64, normalize, tokens_in](std::vector<std::vector<float>> out) {
                if (normalize)
                  for (auto& e : out) l2_normalize(e);
                return tei ? tei_embed_answer(out)
                           : openai_embeddings_answer(out, base64, state_.model_name, tokens_in);
              });
  }

  void predict() {
    const PredictRequest parsed = parse_tei_predict(request_.body(), limits());
    const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
    std::vector<ServedModel::Text> texts;
    for (std::size_t i = 0; i < parsed.inputs.size(); ++i)
      texts.push_back(tokens(parsed.inputs[i], truncate, i));
    const bool raw = parsed.raw_scores, batch = parsed.batch;
    run_model(std::move(texts), true, [this, raw, batch](std::vector<std::vector<float>> out) {
      for (auto& logits : out)
        logits = label_scores(logits, state_.model.independent_labels(), raw);
      return tei_predict_answer(out, state_.model.labels(), batch);
    });
  }

  void rerank() {
    if (state_.model.dimensions() != 1)
      throw ApiError(424, fmt::format("/rerank needs a cross-encoder with one score "
                                      "(num_labels 1); this classifier has {} labels: use "
                                      "/predict",
                                      state_.model.dimensions()));
    auto parsed = std::make_shared<RerankRequest>(parse_tei_rerank(request_.body(), limits()));
    const bool truncate = parsed->truncate.value_or(state_.settings.truncate);
    std::vector<ServedModel::Text> texts;
    for (std::size_t i = 0; i < parsed->texts.size(); ++i)
      texts.push_back(tokens({parsed->query, parsed->texts[i]}, truncate, i));
    run_model(std::move(texts), true, [parsed](std::vector<std::vector<float>> out) {
      std::vector<float> scores;
      for (const auto& logits : out)
        scores.push_back(label_scores(logits, true, parsed->raw_scores).at(0));
      return tei_rerank_answer(scores, *parsed);
    });
  }

  void answer_questions() {
    auto parsed =
        std::make_shared<QuestionRequest>(parse_question_answering(request_.body(), limits()));
    auto questions = std::make_shared<ServedQuestions>(question_features(
        parsed->questions, parsed->context, state_.model.tokenizer(), state_.model.max_tokens()));
    std::vector<ServedModel::Text> texts;
    for (const auto& feature : questions->features.features) {
      ServedModel::Text& t = texts.emplace_back();
      for (std::size_t k = 0; k < feature.input_ids.size() && feature.attention_mask[k] != 0; ++k) {
        t.ids.push_back(feature.input_ids[k]);
        t.types.push_back(feature.token_type_ids[k]);
      }
    }
    if (static_cast<std::int64_t>(texts.size()) > state_.settings.max_inputs)
      throw ApiError(413, fmt::format("the questions over this context make {} windows of "
                                      "model.seq_len tokens, more than serve.max_inputs ({}): "
                                      "send a shorter context or fewer questions",
                                      texts.size(), state_.settings.max_inputs));
    run_model(
        std::move(texts), false, [this, parsed, questions](std::vector<std::vector<float>> out) {
          return question_answering_answer(
              served_answers(*questions, out, state_.model.tokenizer(), state_.model.max_tokens(),
                             parsed->top_k, parsed->max_answer_length),
              *parsed);
        });
  }

  void reply(int status, std::string body, const char* type = "application/json",
             std::vector<std::pair<const char*, const char*>> headers = {}) {
    auto response = std::make_shared<Response>(static_cast<http::status>(status), 11);
    response->set(http::field::server, "polyhal");
    response->set(http::field::content_type, type);
    for (const auto& [name, value] : headers) response->set(name, value);
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

  explicit Impl(ServerState& s) : state(s) {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec != net::error::operation_aborted) {
          spdlog::warn("serve: accept failed: {}", ec.message());
          accept();
        }
        return;
      }
      const bool over = state.metrics.connections.load() >= state.settings.max_connections;
      std::make_shared<Session>(std::move(socket), state, over)->start();
      accept();
    });
  }
};

HttpServer::HttpServer(ServerState& state) : impl_(std::make_unique<Impl>(state)) {}
HttpServer::~HttpServer() = default;

unsigned short HttpServer::listen() {
  auto& m = *impl_;
  const auto& s = m.state.settings;
  beast::error_code ec;
  const auto address = net::ip::make_address(s.host, ec);
  if (ec)
    throw ConfigError(
        fmt::format("key 'serve.host': '{}' is not an IP address (127.0.0.1, ::1, "
                    "0.0.0.0)",
                    s.host));
  const tcp::endpoint where(address, static_cast<unsigned short>(s.port));
  m.acceptor.open(where.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(where, ec);
  if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(ExitCode::unavailable,
                fmt::format("serve: cannot listen on {}:{} (keys 'serve.host', 'serve.port'): {}",
                            s.host, s.port, ec.message()));
  return m.acceptor.local_endpoint().port();
}

void HttpServer::run(int threads) {
  auto& m = *impl_;
  // A request waiting for its batch has no operation pending on the I/O
  // context: without the guard, run() would return once the acceptor closes
  // and the answers posted later would never be written.
  auto guard = net::make_work_guard(m.io);
  m.accept();
  net::signal_set signals(m.io, SIGINT, SIGTERM);
  std::thread drainer;
  signals.async_wait([&](beast::error_code ec, int signal) {
    if (ec) return;
    spdlog::info("serve: {}: refusing new requests, answering the {} in flight", strsignal(signal),
                 m.state.metrics.in_flight.load());
    m.state.draining = true;
    beast::error_code ignored;
    m.acceptor.close(ignored);
    drainer = std::thread([&] {
      m.state.batcher.drain();
      // Answers are written on the I/O threads: wait for them (bounded).
      const auto until = Clock::now() + std::chrono::seconds(30);
      while (m.state.metrics.in_flight.load() > 0 && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      m.io.stop();
    });
  });
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { run_io(m.io, m.state.metrics); });
  run_io(m.io, m.state.metrics);
  for (auto& t : pool) t.join();
  if (drainer.joinable()) drainer.join();
}

}  // namespace polyhal::serve
