// The plugin boundary: every bad plugin gets a one-line reason and never
// takes the good ones down; a plugin stays loaded while its objects live.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/boundary_layout.hpp"
#include "polyhal/error.hpp"
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

const PluginCandidate& candidate_named(const PluginLoader& loader, const char* file_part) {
  for (const auto& c : loader.candidates()) {
    if (c.path.filename().string().find(file_part) != std::string::npos) return c;
  }
  throw std::runtime_error(std::string("no candidate ") + file_part);
}

/// The candidate whose file name contains `file_part` was refused with a
/// reason containing `text`.
void expect_reason(const PluginLoader& loader, const std::string& file_part,
                   const std::string& text) {
  const std::string reason = candidate_named(loader, file_part.c_str()).reason;
  EXPECT_NE(reason.find(text), std::string::npos) << reason;
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
    EXPECT_EQ(c.abi, "8.0");
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
  const auto& c = candidate_named(loader, name.c_str());
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
  expect_fixture_refused("wrongabi", "plugin ABI 9.0, host accepts 8.0-8.0");
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

TEST(Loader, AnInstalledLauncherAlsoSearchesUsrLocal) {
  TempDir prefix;
  std::filesystem::create_directories(prefix.path() / "bin");
  PluginSearchOptions options;
  options.use_environment = false;
  options.executable_dir = prefix.path() / "bin";
  auto dirs = plugin_search_dirs(options);
  // Multiarch first, as polyhal was built, then plain lib (GNUInstallDirs'
  // choice under /usr/local).
  const std::vector<std::filesystem::path> local = local_plugin_dirs();
  ASSERT_EQ(dirs.size(), 1 + local.size());
  EXPECT_EQ(dirs[0].origin, "install");
  EXPECT_EQ(dirs[0].path,
            std::filesystem::weakly_canonical(installed_plugin_dir(prefix.path() / "bin")));
  EXPECT_EQ(local.front(),
            std::filesystem::path("/usr/local") / installed_plugin_dir("bin").lexically_normal());
  EXPECT_EQ(local.back(), "/usr/local/lib/polyhal/plugins");
  for (std::size_t i = 0; i < local.size(); ++i) {
    EXPECT_EQ(dirs[1 + i].path, local[i]);
    EXPECT_EQ(dirs[1 + i].origin, "local");
  }
  // A launcher in a build tree searches the tree, not /usr/local.
  prefix.write("CMakeCache.txt", "");
  dirs = plugin_search_dirs(options);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[1].origin, "build tree");
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

/// A fresh plugin directory `leaf` below `parent` (both created) holding
/// the gaudi plugin.
fs::path plugin_below(const fs::path& parent, const std::string& leaf = "plugins") {
  fs::create_directories(parent / leaf);
  fs::copy_file(test::built_plugin("gaudi"), parent / leaf / "libpolyhal_plugin_gaudi.so");
  return parent / leaf;
}

PluginLoader load_from(const fs::path& dir, bool allow_writable = false) {
  PluginSearchOptions options;
  options.explicit_dirs = {dir};
  options.use_environment = false;
  options.allow_world_writable = allow_writable;
  return PluginLoader(options);
}

TEST(LoaderTrust, RefusesAPluginDirectoryInsideAWorldWritableParent) {
  TempDir root;
  const fs::path open_parent = root.path() / "shared";
  const fs::path dir = plugin_below(open_parent);
  fs::permissions(open_parent, fs::perms::all);  // 0777: anyone may replace 'plugins'
  const auto loader = load_from(dir);
  EXPECT_TRUE(loader.backend_names().empty());
  expect_reason(loader, "gaudi", "directory " + open_parent.string() + " is world-writable");
  EXPECT_EQ(load_from(dir, /*allow_writable=*/true).backend_names().size(), 1u);
}

TEST(LoaderTrust, AcceptsAStickyParentButNotAStickyPluginDirectory) {
  TempDir root;
  const fs::path sticky_parent = root.path() / "tmp-like";
  const fs::path dir = plugin_below(sticky_parent);
  // 1777 as /tmp: only an entry's owner may rename it, so the path holds.
  ::chmod(sticky_parent.c_str(), 01777);
  EXPECT_EQ(load_from(dir).backend_names(), std::vector<std::string>{"gaudi"});
  // The plugin's own directory may not be: anyone could add a plugin there.
  ::chmod(dir.c_str(), 01777);
  const auto loader = load_from(dir);
  EXPECT_TRUE(loader.backend_names().empty());
  expect_reason(loader, "gaudi", dir.string() + " is world-writable");
}

TEST(LoaderTrust, FollowsSymlinksAndChecksWhereThePluginReallyIs) {
  TempDir root;
  const fs::path drop = root.path() / "drop";
  const fs::path real = plugin_below(drop, "box");
  fs::permissions(real, fs::perms::all);
  fs::create_directories(root.path() / "plugins");
  fs::create_symlink(real / "libpolyhal_plugin_gaudi.so",
                     root.path() / "plugins" / "libpolyhal_plugin_gaudi.so");
  const auto loader = load_from(root.path() / "plugins");
  EXPECT_TRUE(loader.backend_names().empty());
  expect_reason(loader, "gaudi", "directory " + real.string() + " is world-writable");
}

TEST(LoaderTrust, RefusesFilesOwnedByAnotherUserEvenWhenWritabilityIsAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  TempDir root;
  const fs::path dir = plugin_below(root.path());
  const fs::path file = dir / "libpolyhal_plugin_gaudi.so";
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  for (bool allow : {false, true}) {
    const auto loader = load_from(dir, allow);
    EXPECT_TRUE(loader.backend_names().empty());
    expect_reason(loader, "gaudi", "file " + file.string() + " is owned by uid 65534");
  }
}

TEST(LoaderTrust, RefusesADirectoryWritableByAForeignGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to set another group";
  TempDir root;
  const fs::path dir = plugin_below(root.path());
  ASSERT_EQ(::chown(dir.c_str(), 0, 65534), 0);
  ::chmod(dir.c_str(), 0775);
  const auto loader = load_from(dir);
  expect_reason(loader, "gaudi", "is writable by group 65534");
}

TEST(LoaderTrust, RelativeEnvironmentEntriesAreRefusedWithAReason) {
  ::setenv("POLYHAL_PLUGIN_PATH", "plugins:/nonexistent/ok", 1);
  PluginSearchOptions options;
  const auto dirs = plugin_search_dirs(options);
  ::unsetenv("POLYHAL_PLUGIN_PATH");
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0].path, "plugins");
  EXPECT_NE(dirs[0].refused.find("relative entry 'plugins' refused"), std::string::npos);
  EXPECT_TRUE(dirs[1].refused.empty());
}

TEST(LoaderTrust, APluginWhoseFileNameIsAnotherBackendsIsRefused) {
  TempDir dir;
  fs::copy_file(test::built_plugin("gaudi"), dir.path() / "libpolyhal_plugin_fast.so");
  const auto loader = load_from(dir.path());
  expect_reason(loader, "fast", "declares backend 'gaudi' but its file is named for 'fast'");
}

TEST(LoaderIsolation, OnlyTheSelectedBackendIsOpened) {
  PluginDir plugins;
  plugins.add_fixture("crash");  // would kill this process if it were loaded
  PluginSearchOptions options;
  options.explicit_dirs = {plugins.dir.path()};
  options.use_environment = false;
  options.only_backend = "gaudi";
  PluginLoader loader(options);
  EXPECT_EQ(loader.backend_names(), std::vector<std::string>{"gaudi"});
  EXPECT_EQ(candidate_named(loader, "crash").status, PluginCandidate::Status::not_selected);
  EXPECT_EQ(candidate_named(loader, "cpu").status, PluginCandidate::Status::not_selected);
}

TEST(LoaderIsolation, ProbesReportCrashesHangsAndForeignExceptions) {
  PluginDir plugins;
  for (const char* name : {"crash", "throw", "hang"}) plugins.add_fixture(name);
  PluginSearchOptions options;
  options.explicit_dirs = {plugins.dir.path()};
  options.use_environment = false;
  const auto probed = probe_plugins(
      options, [](Backend& backend) { return "in child: " + backend.name(); },
      std::chrono::seconds(2));
  std::map<std::string, ProbedPlugin> by_name;
  for (const auto& p : probed) by_name[p.candidate.name] = p;
  EXPECT_EQ(by_name["crash"].candidate.status, PluginCandidate::Status::crashed);
  EXPECT_NE(by_name["crash"].candidate.reason.find("crashed while loading: signal 11 (SIGSEGV)"),
            std::string::npos)
      << by_name["crash"].candidate.reason;
  EXPECT_EQ(by_name["hang"].candidate.status, PluginCandidate::Status::crashed);
  EXPECT_NE(by_name["hang"].candidate.reason.find("did not finish loading within 2 s"),
            std::string::npos);
  EXPECT_EQ(by_name["throw"].candidate.status, PluginCandidate::Status::rejected);
  EXPECT_NE(by_name["throw"].candidate.reason.find("exception of unknown type"), std::string::npos);
  for (const char* name : {"cpu", "ipu", "gaudi"}) {
    EXPECT_EQ(by_name[name].candidate.status, PluginCandidate::Status::loaded) << name;
    EXPECT_EQ(by_name[name].output, std::string("in child: ") + name);
  }
}

TEST(LoaderIsolation, AForeignExceptionFromOpeningDevicesBecomesAnError) {
  PluginDir plugins;
  plugins.add_fixture("throwopen");
  const auto loader = plugins.load();
  try {
    loader.backend("throwopen")->open_devices({});
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("exception of unknown type"), std::string::npos);
  }
}

}  // namespace
}  // namespace polyhal
