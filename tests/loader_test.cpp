// The plugin boundary: every bad plugin gets a one-line reason and never
// takes the good ones down; a plugin stays loaded while its objects live.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "polyhal/boundary_layout.hpp"
#include "polyhal/error.hpp"
#include "polyhal/plugin_loader.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

/// A directory with the three real plugins plus `extra` files copied in.
struct PluginDir {
  TempDir dir;
  PluginDir() {
    for (const char* name : {"cpu", "ipu", "gaudi"}) {
      fs::copy_file(test::built_plugin(name), dir.path() / test::built_plugin(name).filename());
    }
  }
  PluginLoader load(bool allow_world_writable = false) const {
    PluginSearchOptions options;
    options.explicit_dirs = {dir.path()};
    options.use_environment = false;
    options.allow_world_writable = allow_world_writable;
    return PluginLoader(options);
  }
  void add_fixture(const std::string& name) const {
    const std::string file = "libpolyhal_plugin_" + name + ".so";
    fs::copy_file(fs::path(POLYHAL_FIXTURE_DIR) / file, dir.path() / file);
  }
};

const PluginCandidate& candidate_named(const PluginLoader& loader, const std::string& file_part) {
  for (const auto& c : loader.candidates()) {
    if (c.path.filename().string().find(file_part) != std::string::npos) return c;
  }
  throw std::runtime_error("no candidate " + file_part);
}

void expect_other_backends_work(const PluginLoader& loader) {
  EXPECT_EQ(loader.backend_names(), (std::vector<std::string>{"cpu", "gaudi", "ipu"}));
  auto devices = loader.backend("gaudi")->open_devices(
      resolve_device_options(loader.backend("gaudi")->device_options(), {}));
  EXPECT_EQ(devices.size(), 8u);
}

TEST(Loader, LoadsTheThreeInTreePlugins) {
  PluginDir plugins;
  auto loader = plugins.load();
  expect_other_backends_work(loader);
  for (const auto& c : loader.candidates()) {
    EXPECT_EQ(c.status, PluginCandidate::Status::loaded) << c.path << ": " << c.reason;
    EXPECT_EQ(c.abi, "2.0");
  }
}

TEST(Loader, RejectsCorruptFileWithReason) {
  PluginDir plugins;
  plugins.dir.write("libpolyhal_plugin_corrupt.so", std::string(4096, '\x42'));
  auto loader = plugins.load();
  const auto& c = candidate_named(loader, "corrupt");
  EXPECT_EQ(c.status, PluginCandidate::Status::rejected);
  EXPECT_NE(c.reason.find("not a shared library"), std::string::npos) << c.reason;
  EXPECT_EQ(c.reason.find('\n'), std::string::npos) << "reason must be one line";
  expect_other_backends_work(loader);
}

/// Fixture plugin `name` is refused before anything in it runs, with a
/// reason containing `reason`; asking for its backend fails with exit code 3;
/// the other backends still work.
void expect_fixture_refused(const std::string& name, const std::string& reason) {
  PluginDir plugins;
  plugins.add_fixture(name);
  auto loader = plugins.load();
  const auto& c = candidate_named(loader, name);
  EXPECT_EQ(c.status, PluginCandidate::Status::rejected);
  EXPECT_NE(c.reason.find(reason), std::string::npos) << c.reason;
  expect_other_backends_work(loader);
  try {
    loader.backend(name);
    FAIL() << "expected PluginError";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), ExitCode::unavailable);
  }
}

TEST(Loader, RejectsWrongAbiNamingBothVersions) {
  expect_fixture_refused("wrongabi", "plugin ABI 3.0, host accepts 2.0-2.0");
}

TEST(Loader, RejectsOtherOpSchemaNamingBothVersions) {
  expect_fixture_refused("wrongops",
                         fmt::format("plugin built for op schema {}, host has op schema {}",
                                     kOpSchemaVersion + 1, kOpSchemaVersion));
}

TEST(Loader, RejectsOtherBoundaryLayout) {
  expect_fixture_refused("wronglayout", fmt::format("host {:016x}", boundary_layout_fingerprint()));
}

TEST(Loader, RejectsMissingDependencyNamingTheLibrary) {
  PluginDir plugins;
  plugins.add_fixture("needsdep");
  auto loader = plugins.load();
  const auto& c = candidate_named(loader, "needsdep");
  EXPECT_EQ(c.status, PluginCandidate::Status::rejected);
  EXPECT_NE(c.reason.find("missing dependency"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("libpolyhal_fixture_dependency.so"), std::string::npos) << c.reason;
  expect_other_backends_work(loader);
}

TEST(Loader, RejectsLibraryWithoutEntryPoint) {
  PluginDir plugins;
  plugins.add_fixture("noentry");
  auto loader = plugins.load();
  const auto& c = candidate_named(loader, "noentry");
  EXPECT_EQ(c.status, PluginCandidate::Status::rejected);
  EXPECT_NE(c.reason.find("no entry point 'polyhal_plugin_entry'"), std::string::npos) << c.reason;
  expect_other_backends_work(loader);
}

TEST(Loader, RefusesWorldWritableDirectoryUnlessAllowed) {
  PluginDir plugins;
  ::chmod(plugins.dir.path().c_str(), 0777);
  {
    auto loader = plugins.load();
    EXPECT_TRUE(loader.backend_names().empty());
    EXPECT_NE(candidate_named(loader, "cpu").reason.find("world-writable"), std::string::npos);
  }
  auto allowed = plugins.load(/*allow_world_writable=*/true);
  EXPECT_EQ(allowed.backend_names().size(), 3u);
}

TEST(Loader, EarlierDirectoryShadowsLaterOne) {
  PluginDir first, second;
  PluginSearchOptions options;
  options.explicit_dirs = {first.dir.path(), second.dir.path()};
  options.use_environment = false;
  PluginLoader loader(options);
  int shadowed = 0;
  for (const auto& c : loader.candidates()) {
    if (c.status == PluginCandidate::Status::shadowed) {
      ++shadowed;
      EXPECT_EQ(c.path.parent_path(), second.dir.path());
    }
  }
  EXPECT_EQ(shadowed, 3);
}

TEST(Loader, EnvironmentPathIsSearchedAfterExplicitDirs) {
  ::setenv("POLYHAL_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b", 1);
  PluginSearchOptions options;
  options.explicit_dirs = {"/nonexistent/explicit"};
  const auto dirs = plugin_search_dirs(options);
  ::unsetenv("POLYHAL_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0].origin, "--plugin-path");
  EXPECT_EQ(dirs[1].path, "/nonexistent/a");
  EXPECT_EQ(dirs[2].origin, "POLYHAL_PLUGIN_PATH");
}

TEST(Loader, LibraryStaysLoadedWhileAnyObjectLives) {
  TempDir dir;
  const fs::path copy = dir.path() / "libpolyhal_plugin_gaudi.so";
  fs::copy_file(test::built_plugin("gaudi"), copy);
  auto is_loaded = [&] {
    void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle != nullptr) ::dlclose(handle);
    return handle != nullptr;
  };
  std::shared_ptr<Buffer> buffer;
  std::shared_ptr<Kernel> kernel;
  {
    auto backend = PluginLoader::load_file(copy, false, nullptr);
    auto devices = backend->open_devices(resolve_device_options(backend->device_options(), {}));
    buffer = devices[0]->allocate(1024, "test");
    kernel =
        devices[0]->prepare_kernel({OpKind::matmul, DType::bf16, {{4, 8}, {8, 2}}, MatmulAttrs{}});
  }
  EXPECT_TRUE(is_loaded()) << "objects from the plugin are alive";
  kernel.reset();
  EXPECT_TRUE(is_loaded()) << "a buffer is still alive";
  buffer.reset();
  EXPECT_FALSE(is_loaded()) << "the last object is gone, the library should be unloaded";
}

}  // namespace
}  // namespace polyhal
