// `polyhal serve MODEL_DIR`: text-embeddings-inference's one command, its
// flags and environment variables as config keys, each mistake named by
// where it came from. (--check loads the model and stops before listening;
// tests/serve_test.py serves the real model this way.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(POLYHAL_SOURCE_DIR) / "tests/data/families/xlm_roberta_embedder";

test::CommandResult serve(const std::string& environment, const std::string& arguments) {
  return test::run_command(
      fmt::format("env {} {} serve {} --check", environment, POLYHAL_LAUNCHER, arguments));
}

TEST(ServeOneCommand, AModelDirectoryAloneIsAServerConfig) {
  auto r = serve("", kModel.string() + " --port 9123 --host 0.0.0.0 --precision f32");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model xlm_roberta_embedder (embeddings: mean pooling"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("on 0.0.0.0:9123"), std::string::npos) << r.output;
  // TEI's container variables, and a flag over them.
  r = serve("MODEL_ID=" + kModel.string() + " PORT=9124 MAX_BATCH_TOKENS=512", "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("batches of up to 512 tokens on 127.0.0.1:9124"), std::string::npos)
      << r.output;
  r = serve("PORT=9124", kModel.string() + " --port 9125 --set serve.max_batch_tokens=64");
  EXPECT_NE(r.output.find("batches of up to 64 tokens on 127.0.0.1:9125"), std::string::npos)
      << r.output;
}

TEST(ServeOneCommand, EachMistakeNamesTheFlagOrVariable) {
  auto r = serve("", kModel.string() + " --port abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--port abc: key 'serve.port'"), std::string::npos) << r.output;
  r = serve("PORT=70000", kModel.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("PORT=70000 (environment): key 'serve.port'"), std::string::npos)
      << r.output;
  r = serve("", kModel.string() + " --precision f64");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--precision f64"), std::string::npos) << r.output;
  r = serve("", "sentence-transformers/all-MiniLM-L6-v2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("neither a model directory nor a config file"), std::string::npos)
      << r.output;
  r = serve("MODEL_ID=/no/such/model", "");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("MODEL_ID=/no/such/model (environment): not a directory"),
            std::string::npos)
      << r.output;
}

// The port is bound before the model loads: one in use is a config error
// (exit 2) naming where it was set, said before any loading.
TEST(ServeOneCommand, APortInUseIsAConfigErrorNamingTheFlag) {
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  ASSERT_EQ(::getsockname(held, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int port = ntohs(address.sin_port);
  const auto r = test::run_command(fmt::format("{} serve {} --port {} --log-level warn",
                                               POLYHAL_LAUNCHER, kModel.string(), port));
  ::close(held);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fmt::format("--port {}: key 'serve.port': cannot listen on "
                                      "127.0.0.1:{}: Address already in use",
                                      port, port)),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace polyhal
