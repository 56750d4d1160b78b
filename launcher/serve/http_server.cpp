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
  return target == "/embed";
}

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
    parser_->header_limit(16 * 1024);
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
    const bool known = path == "/ready" || path == "/v1/models" || path == "/metrics" ||
                       path == "/v1/embeddings" || path == "/embed";
    if (!known) {
      endpoint_ = "other";
      return reply_error(404, fmt::format("no endpoint {}: POST /v1/embeddings or /embed", path),
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
    embed(path == "/embed");
  }

  void embed(bool tei) {
    if (state_.draining) return reply_error(503, "draining: the server is stopping", tei);
    const std::string_view type = text(request_[http::field::content_type]);
    if (type.substr(0, 16) != "application/json")
      return reply_error(415,
                         fmt::format("Content-Type is '{}': send application/json",
                                     std::string(type.substr(0, 80))),
                         tei);
    EmbedRequest parsed;
    EmbedJob job;
    try {
      const ApiLimits limits{state_.settings.max_inputs, state_.model.dimensions()};
      parsed = tei ? parse_tei_embed(request_.body(), limits)
                   : parse_openai_embeddings(request_.body(), limits);
      const bool truncate = parsed.truncate.value_or(state_.settings.truncate);
      for (std::size_t i = 0; i < parsed.inputs.size(); ++i) {
        job.texts.push_back(state_.model.tokenize(parsed.inputs[i]));
        if (job.texts.back().truncated && !truncate)
          throw ApiError(413, fmt::format("input {} has more than {} tokens (model.seq_len); "
                                          "shorten it or send truncate: true",
                                          i, state_.model.max_tokens()));
      }
    } catch (const ApiError& e) {
      return reply_error(e.status(), e.what(), tei);
    }
    const bool base64 = parsed.base64;
    const bool normalize = parsed.normalize.value_or(state_.model.normalizes());
    const std::int64_t tokens = job.tokens();
    job.done = [self = shared_from_this(), tei, base64, normalize, tokens](
                   std::vector<std::vector<float>> embeddings, const std::string& error) {
      std::string body;
      if (error.empty()) {
        if (normalize)
          for (auto& e : embeddings) l2_normalize(e);
        body = tei ? tei_embed_answer(embeddings)
                   : openai_embeddings_answer(embeddings, base64, self->state_.model_name, tokens);
      }
      net::post(self->stream_.get_executor(), [self, body = std::move(body), error, tei] {
        if (!error.empty()) return self->reply_error(500, "the model failed: " + error, tei);
        self->reply(200, body);
      });
    };
    if (!state_.batcher.submit(std::move(job)))
      return reply_error(state_.draining ? 503 : 429,
                         state_.draining ? "draining: the server is stopping"
                                         : "the queue is full (serve.max_queue): retry shortly",
                         tei, {{"Retry-After", "1"}});
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
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  bool keep_alive_ = false;
  std::string endpoint_;
  Clock::time_point started_;
};

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
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { m.io.run(); });
  m.io.run();
  for (auto& t : pool) t.join();
  if (drainer.joinable()) drainer.join();
}

}  // namespace polyhal::serve
