// polyhal's MPI and HDF5 modules: libpolyhal and the launcher need neither
// Open MPI nor libhdf5 to load, and without a module the user is told which
// package to install, with the documented exit code (3), before anything
// is written.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace polyhal {
namespace {

const std::filesystem::path kSource = POLYHAL_SOURCE_DIR;
const std::filesystem::path kModules = POLYHAL_MODULE_BUILD_DIR;

/// The shared libraries `file` names as DT_NEEDED.
std::string needed_libraries(const std::filesystem::path& file) {
  const auto r = test::run_command("objdump -p " + file.string() + " | grep NEEDED");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

/// `polyhal prepare-data` of the test corpus into `output`, with modules
/// looked for in `module_dir`.
test::CommandResult prepare_data(const std::filesystem::path& module_dir,
                                 const std::filesystem::path& output) {
  return test::run_command(
      fmt::format("POLYHAL_MODULE_DIR={} {} prepare-data --input {} --vocab {} --output {}",
                  module_dir.string(), POLYHAL_LAUNCHER, (kSource / "tests/data/corpus").string(),
                  (kSource / "tests/data/corpus/vocab.txt").string(), output.string()));
}

TEST(CoreModules, LibpolyhalAndTheLauncherLinkNeitherOpenMpiNorHdf5) {
  for (const std::filesystem::path file : {POLYHAL_CORE_LIBRARY, POLYHAL_LAUNCHER}) {
    const std::string needed = needed_libraries(file);
    EXPECT_NE(needed.find("libfmt"), std::string::npos) << file << "\n" << needed;
    EXPECT_EQ(needed.find("libmpi"), std::string::npos) << file << "\n" << needed;
    EXPECT_EQ(needed.find("libhdf5"), std::string::npos) << file << "\n" << needed;
  }
  EXPECT_NE(needed_libraries(kModules / "libpolyhal-mpi.so").find("libmpi"), std::string::npos);
  EXPECT_NE(needed_libraries(kModules / "libpolyhal-hdf5.so").find("libhdf5"), std::string::npos);
}

TEST(CoreModules, WithoutTheHdf5ModuleReadingAndWritingHdf5NameThePackage) {
  test::TempDir dir;
  const std::string without = "POLYHAL_MODULE_DIR=" + (dir.path() / "none").string() + " ";
  // Writing: prepare-data fails before its output directory is made.
  auto r = prepare_data(dir.path() / "none", dir.path() / "out");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("needs polyhal's hdf5 module"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("install the package polyhal-module-hdf5"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find((dir.path() / "none/libpolyhal-hdf5.so").string() + ": not installed"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
  // Reading: MLPerf pre-training data.
  const auto config =
      dir.write("p.yaml", fmt::format("backend: cpu\ntask: pretrain\nmodel: {{preset: tiny, "
                                      "seq_len: 16}}\nbatch: {{micro: 2}}\ndata: {{source: "
                                      "mlperf_hdf5, files: {}}}\nsteps: 1\n",
                                      (kSource / "tests/data/mlperf").string()));
  r = test::run_command(without + POLYHAL_LAUNCHER + " run " + config.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("install the package polyhal-module-hdf5"), std::string::npos)
      << r.output;
}

TEST(CoreModules, WithoutTheMpiModuleMpiRanksNameThePackage) {
  test::TempDir dir;
  const auto r = test::run_command(
      "POLYHAL_MODULE_DIR=" + dir.path().string() + " " + POLYHAL_LAUNCHER + " run " +
      (kSource / "configs/pretrain-demo-cpu.yaml").string() +
      " --set collective=mpi --set steps=1 --set checkpoint.dir=" + (dir.path() / "c").string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("running as MPI ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("install the package polyhal-module-mpi"), std::string::npos) << r.output;
}

TEST(CoreModules, AFileThatIsNoModuleIsRefusedByName) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "m");
  // A shared library, but not a module of polyhal's (a plugin without its entry point).
  std::filesystem::copy_file(
      std::filesystem::path(POLYHAL_FIXTURE_DIR) / "libpolyhal_plugin_noentry.so",
      dir.path() / "m/libpolyhal-hdf5.so");
  const auto r = prepare_data(dir.path() / "m", dir.path() / "out");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("no entry point 'polyhal_module_entry'"), std::string::npos) << r.output;
}

TEST(CoreModules, AModuleOthersCouldReplaceIsNotLoaded) {
  test::TempDir dir;
  const auto modules = dir.path() / "m";
  std::filesystem::create_directories(modules);
  std::filesystem::copy_file(kModules / "libpolyhal-hdf5.so", modules / "libpolyhal-hdf5.so");
  std::filesystem::permissions(modules, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
  const auto r = prepare_data(modules, dir.path() / "out");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("writable"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

}  // namespace
}  // namespace polyhal
