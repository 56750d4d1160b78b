// Config section `serve` (polyhal serve), read by task inference.
#include "serve_section.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/config_keys.hpp"
#include "util/format.hpp"

namespace polyhal {

ConfigSection serve_section() {
  using S = ServeSettings;
  auto section = task_section<S>();
  SectionKeys<S> keys(section, task_section_of<S>);
  keys.add("host", &S::host,
           "polyhal serve: the address to listen on (loopback unless told otherwise)")
      .add("port", &S::port, "polyhal serve: the TCP port (0: any free one, printed at start)",
           [](const ConfigValue& v) { return static_cast<int>(v.integer(0, 65535)); })
      .add("max_batch_tokens", &S::max_batch_tokens,
           "polyhal serve: real tokens one batch of requests holds at most (packed into rows)",
           at_least(1, 1 << 24))
      .add("max_wait_ms", &S::max_wait_ms,
           "polyhal serve: how long a request waits for others to share its batch",
           [](const ConfigValue& v) {
             const double ms = v.number();
             if (!(ms >= 0.0 && ms <= 10'000.0)) v.fail("expected 0 to 10000 ms");
             return ms;
           })
      .add("max_queue", &S::max_queue,
           "polyhal serve: requests waiting or running at most (more: 429 with Retry-After)",
           at_least(1, 1'000'000))
      .add("max_body_bytes", &S::max_body_bytes,
           "polyhal serve: the largest request body (more: 413)", at_least(64, 1 << 30))
      .add("max_inputs", &S::max_inputs,
           "polyhal serve: texts (or question windows) per request at most", at_least(1, 1'000'000))
      .add("truncate", &S::truncate,
           "polyhal serve: texts over model.seq_len tokens are truncated; false: refused (413)")
      .add("timeout_seconds", &S::timeout_seconds,
           "polyhal serve: time a client has to send a request and to read the answer", seconds())
      .add("replicas", &S::replicas,
           "polyhal serve: copies of the model, each running its own batches", at_least(1, 64))
      .add("max_connections", &S::max_connections, "polyhal serve: connections open at once",
           at_least(1, 100'000))
      .add("api_key_file", &S::api_key_file,
           "polyhal serve: a file holding the bearer token requests must carry", {},
           {.input = InputPath::file})
      .add("model_name", &S::model_name,
           "polyhal serve: the model's name in answers (default: the model directory's name)")
      .custom(
          "allowed_hosts",
          "polyhal serve: the Host names requests may carry (\"*\": any); default: on a "
          "loopback address, localhost and loopback addresses only (DNS rebinding)",
          [](const ConfigValue& v, S& s) {
            for (const auto& item : v.items()) {
              const std::string host = detail::ascii_lower(item.text());
              if (host.empty() || host.find_first_of(" /\t") != std::string::npos)
                item.fail("expected a host name or address, or \"*\"");
              s.allowed_hosts.push_back(host);
            }
          },
          [](const S& s) {
            return s.allowed_hosts.empty() ? std::string("[]")
                                           : fmt::format("[{}]", fmt::join(s.allowed_hosts, ", "));
          })
      .custom(
          "cors_allow_origins",
          "polyhal serve: the web origins (scheme://host[:port], or \"*\") whose pages may call "
          "it from a browser; default: none (CORS off)",
          [](const ConfigValue& v, S& s) {
            for (const auto& item : v.items()) {
              const std::string origin = detail::ascii_lower(item.text());
              const auto scheme = origin.find("://");
              const bool url = (origin.starts_with("http://") || origin.starts_with("https://")) &&
                               origin.size() > scheme + 3 &&
                               origin.find_first_of("/ \t", scheme + 3) == std::string::npos;
              if (origin != "*" && !url)
                item.fail(
                    "expected an origin such as https://app.example.com (a scheme, a host, "
                    "an optional port, no path), or \"*\"");
              s.cors_allow_origins.push_back(origin);
            }
          },
          [](const S& s) { return fmt::format("[{}]", fmt::join(s.cors_allow_origins, ", ")); })
      .custom(
          "models",
          "polyhal serve: more model directories served beside model.dir, each named by its "
          "directory (a request's \"model\" picks one)",
          [](const ConfigValue& v, S& s) {
            for (const auto& item : v.items()) {
              const std::string dir = item.text();
              if (dir.empty()) item.fail("expected a model directory");
              s.models.emplace_back(dir);
            }
          },
          [](const S& s) {
            std::vector<std::string> dirs;
            for (const auto& d : s.models) dirs.push_back(d.string());
            return fmt::format("[{}]", fmt::join(dirs, ", "));
          });
  return section;
}

}  // namespace polyhal
