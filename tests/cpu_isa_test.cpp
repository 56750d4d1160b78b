// The CPU plugin's ISA choice, including the AMX path this machine may lack:
// the choice is a pure function of the features, so every branch is tested.
#include <gtest/gtest.h>

#include "cpu_isa.hpp"
#include "cpu_threads.hpp"
#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

CpuFeatures sapphire_rapids() {
  return {true, true, true, true, true};
}
CpuFeatures cooper_lake() {
  return {true, true, true, false, false};
}
CpuFeatures skylake() {
  return {true, true, false, false, false};
}

TEST(CpuIsa, PicksAmxWhenPresentAndPermitted) {
  const auto choice = choose_isa(sapphire_rapids(), "auto");
  EXPECT_EQ(choice.isa, Isa::amx);
  EXPECT_EQ(choice.reason, "best available");
}

TEST(CpuIsa, Int8RunsOnVnniOrAmxInt8AndSaysWhyNot) {
  CpuFeatures spr = sapphire_rapids();
  spr.avx512_vnni = spr.amx_int8 = true;
  EXPECT_EQ(int8_support(spr, Isa::amx).engine, "AMX-INT8");
  const auto capped = int8_support(spr, Isa::avx512_core_bf16);
  EXPECT_EQ(capped.engine, "AVX512-VNNI");
  EXPECT_NE(capped.reason.find("AMX-INT8 needs device.isa amx"), std::string::npos)
      << capped.reason;
  CpuFeatures cpl = cooper_lake();
  cpl.avx512_vnni = true;
  EXPECT_TRUE(int8_support(cpl, Isa::avx512_core_bf16).runs);
  const auto avx2 = int8_support(cpl, Isa::avx2);
  EXPECT_FALSE(avx2.runs);
  EXPECT_NE(avx2.reason.find("caps oneDNN below AVX512-VNNI"), std::string::npos) << avx2.reason;
  const auto old = int8_support(skylake(), Isa::avx512_core);
  EXPECT_FALSE(old.runs);
  EXPECT_NE(old.reason.find("no AVX512-VNNI"), std::string::npos) << old.reason;
}

TEST(CpuIsa, FallsBackToAvx512Bf16WhenKernelRefusesAmx) {
  auto features = sapphire_rapids();
  features.amx_permitted = false;
  const auto choice = choose_isa(features, "auto");
  EXPECT_EQ(choice.isa, Isa::avx512_core_bf16);
  EXPECT_NE(choice.reason.find("ARCH_REQ_XCOMP_PERM"), std::string::npos) << choice.reason;
}

TEST(CpuIsa, CapLowersTheChoice) {
  EXPECT_EQ(choose_isa(sapphire_rapids(), "avx512_core_bf16").isa, Isa::avx512_core_bf16);
  EXPECT_EQ(choose_isa(sapphire_rapids(), "avx2").isa, Isa::avx2);
  EXPECT_EQ(choose_isa(skylake(), "avx2").reason.substr(0, 20), "capped at avx2 by de");
}

TEST(CpuIsa, AskingForAmxWithoutItIsAClearError) {
  try {
    choose_isa(cooper_lake(), "amx");
    FAIL() << "expected DeviceUnavailableError";
  } catch (const DeviceUnavailableError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("amx is not usable on this CPU"), std::string::npos) << text;
    EXPECT_NE(text.find("best it offers is avx512_core_bf16"), std::string::npos) << text;
  }
  EXPECT_THROW(choose_isa(skylake(), "avx512_core_bf16"), DeviceUnavailableError);
}

TEST(CpuIsa, DetectionOnThisMachineIsConsistent) {
  const auto features = detect_cpu_features();
  EXPECT_LE(features.amx_permitted, features.amx);
  EXPECT_LE(features.avx512_bf16, features.avx512_core);
  const auto choice = choose_isa(features, "auto");
  EXPECT_FALSE(choice.reason.empty());
}

// device.threads, then OMP_NUM_THREADS, then the affinity mask; never the
// machine's total, which oversubscribes a process bound to fewer cores.
TEST(CpuThreads, ConfigThenOmpNumThreadsThenTheCpusThisProcessMayRunOn) {
  EXPECT_EQ(choose_threads(3, "8", 2).threads, 3);
  EXPECT_EQ(choose_threads(3, "8", 2).reason, "device.threads");
  EXPECT_EQ(choose_threads(0, "8", 2).threads, 8);
  EXPECT_EQ(choose_threads(0, "8", 2).reason, "OMP_NUM_THREADS=8");
  EXPECT_EQ(choose_threads(0, "4,2", 2).threads, 4) << "the outer level of a nesting list";
  for (const char* bad : {"", "0", "-2", "x", "4x", "99999999999", "4097"}) {
    EXPECT_EQ(choose_threads(0, bad, 2).threads, 2) << bad;
    EXPECT_NE(choose_threads(0, bad, 2).reason.find("ignored: not 1 to 4096"), std::string::npos)
        << bad;
  }
  EXPECT_EQ(choose_threads(0, "4096", 2).threads, 4096);
  EXPECT_EQ(choose_threads(0, nullptr, 1).threads, 1);
  EXPECT_EQ(choose_threads(0, nullptr, 1).reason, "the 1 CPU this process may run on");
  EXPECT_EQ(choose_threads(0, nullptr, 0).threads, 1) << "never zero threads";
  EXPECT_GE(affinity_cpu_count(), 1);
}

}  // namespace
}  // namespace polyhal::cpu
