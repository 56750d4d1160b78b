// The CPU plugin's ISA choice, including the AMX path this machine may lack:
// the choice is a pure function of the features, so every branch is tested.
#include <gtest/gtest.h>

#include "cpu_isa.hpp"
#include "cpu_threads.hpp"
#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

// The CPUs users run, as CPUID shows them.
CpuFeatures haswell() {
  return {.avx2 = true};
}
CpuFeatures alder_lake() {
  return {.avx2 = true, .avx_vnni = true};
}
CpuFeatures skylake() {
  return {.avx2 = true, .avx512_core = true};
}
CpuFeatures cascade_lake() {
  CpuFeatures f = skylake();
  f.avx512_vnni = true;
  return f;
}
CpuFeatures zen4() {
  CpuFeatures f = cascade_lake();
  f.avx512_bf16 = true;
  return f;
}
CpuFeatures zen5() {
  CpuFeatures f = zen4();
  f.avx_vnni = true;
  return f;
}
CpuFeatures sapphire_rapids() {
  CpuFeatures f = zen5();
  f.avx512_fp16 = f.amx = f.amx_int8 = f.amx_permitted = true;
  return f;
}
CpuFeatures granite_rapids() {
  CpuFeatures f = sapphire_rapids();
  f.amx_fp16 = true;
  return f;
}

PrecisionSupport support(const CpuFeatures& f, Isa isa, const char* precision,
                         int onednn_major = 2) {
  for (const auto& mode : precision_modes(f, isa, onednn_major))
    if (mode.precision == precision) return mode.support;
  ADD_FAILURE() << "no mode for " << precision;
  return PrecisionSupport::none;
}

TEST(CpuIsa, AutoPicksTheHighestRungOfEachGeneration) {
  struct Case {
    CpuFeatures features;
    Isa best;
  };
  for (const auto& [features, best] :
       std::vector<Case>{{haswell(), Isa::avx2},
                         {alder_lake(), Isa::avx2_vnni},
                         {skylake(), Isa::avx512_core},
                         {cascade_lake(), Isa::avx512_core_vnni},
                         {zen4(), Isa::avx512_core_bf16},
                         {zen5(), Isa::avx512_core_bf16},
                         {sapphire_rapids(), Isa::avx512_core_amx},
                         {granite_rapids(), Isa::avx512_core_amx_fp16}}) {
    const auto choice = choose_isa(features, "auto");
    EXPECT_EQ(choice.isa, best) << isa_name(best) << ": " << choice.reason;
    EXPECT_EQ(choice.reason.substr(0, 14), "best available");
  }
  EXPECT_EQ(choose_isa({}, "auto").isa, Isa::reference);
}

// The Cascade Lake of the issue: VNNI, no bf16. auto never caps below VNNI,
// int8 runs there, and bf16 is emulated, so mixed takes f32.
TEST(CpuIsa, CascadeLakeRunsInt8OnVnniAndEmulatesBf16) {
  const auto choice = choose_isa(cascade_lake(), "auto");
  ASSERT_EQ(choice.isa, Isa::avx512_core_vnni);
  const auto int8 = int8_support(cascade_lake(), choice.isa);
  EXPECT_TRUE(int8.runs);
  EXPECT_EQ(int8.engine, "AVX512-VNNI");
  EXPECT_EQ(support(cascade_lake(), choice.isa, "f32"), PrecisionSupport::native);
  EXPECT_EQ(support(cascade_lake(), choice.isa, "bf16"), PrecisionSupport::emulated);
  EXPECT_EQ(support(cascade_lake(), choice.isa, "bf32"), PrecisionSupport::emulated);
  EXPECT_EQ(support(cascade_lake(), choice.isa, "f16"), PrecisionSupport::emulated);
  EXPECT_EQ(support(cascade_lake(), choice.isa, "int8"), PrecisionSupport::native);
}

TEST(CpuIsa, EachPrecisionIsNativeOnlyWhereTheCpuHasItsInstructions) {
  EXPECT_EQ(support(zen4(), Isa::avx512_core_bf16, "bf16"), PrecisionSupport::native);
  EXPECT_EQ(support(zen4(), Isa::avx512_core_bf16, "bf32"), PrecisionSupport::native);
  EXPECT_EQ(support(haswell(), Isa::avx2, "bf16"), PrecisionSupport::none);
  EXPECT_EQ(support(alder_lake(), Isa::avx2_vnni, "int8"), PrecisionSupport::native);
  EXPECT_EQ(int8_support(alder_lake(), Isa::avx2_vnni).engine, "AVX-VNNI");
  EXPECT_EQ(int8_support(sapphire_rapids(), Isa::avx512_core_amx).engine, "AMX-INT8");
  // f16 is native on AVX512_FP16 / AMX-FP16 with oneDNN 3 only.
  EXPECT_EQ(support(sapphire_rapids(), Isa::avx512_core_amx, "f16", 3), PrecisionSupport::native);
  EXPECT_EQ(support(sapphire_rapids(), Isa::avx512_core_amx, "f16", 2), PrecisionSupport::emulated);
  EXPECT_EQ(support(zen4(), Isa::avx512_core_bf16, "f16", 3), PrecisionSupport::emulated);
}

TEST(CpuIsa, Int8WithoutVnniRunsSevenBitWeightsAndNamesTheCause) {
  // Capped below VNNI on a CPU that has it: the cap is the cause.
  const auto capped = int8_support(cascade_lake(), Isa::avx512_core);
  EXPECT_TRUE(capped.runs);
  EXPECT_EQ(capped.engine, "AVX-512");
  EXPECT_EQ(capped.weight_max, kInt7Max);
  EXPECT_NE(capped.reason.find("device.isa avx512_core caps oneDNN below VNNI"), std::string::npos)
      << capped.reason;
  // auto on a CPU without VNNI: the CPU is the cause, and no setting is named.
  for (const auto& [features, isa] : std::vector<std::pair<CpuFeatures, Isa>>{
           {skylake(), Isa::avx512_core}, {haswell(), Isa::avx2}}) {
    const auto seven_bit = int8_support(features, isa);
    EXPECT_TRUE(seven_bit.runs);
    EXPECT_EQ(seven_bit.weight_max, kInt7Max);
    EXPECT_NE(seven_bit.reason.find("seven-bit weights"), std::string::npos) << seven_bit.reason;
    EXPECT_NE(seven_bit.reason.find("this CPU has no VNNI"), std::string::npos) << seven_bit.reason;
    EXPECT_EQ(seven_bit.reason.find("device.isa"), std::string::npos) << seven_bit.reason;
  }
  // VNNI and AMX keep eight bits; the reference tier runs no int8.
  EXPECT_EQ(int8_support(cascade_lake(), Isa::avx512_core_vnni).weight_max, kInt8Max);
  EXPECT_EQ(int8_support(alder_lake(), Isa::avx2_vnni).weight_max, kInt8Max);
  EXPECT_FALSE(int8_support(haswell(), Isa::reference).runs);
  const auto amx_capped = int8_support(sapphire_rapids(), Isa::avx512_core_bf16);
  EXPECT_EQ(amx_capped.engine, "AVX512-VNNI");
  EXPECT_NE(amx_capped.reason.find("AMX-INT8 is capped off by device.isa avx512_core_bf16"),
            std::string::npos)
      << amx_capped.reason;
}

TEST(CpuIsa, FallsBackToAvx512Bf16WhenKernelRefusesAmx) {
  auto features = sapphire_rapids();
  features.amx_permitted = false;
  const auto choice = choose_isa(features, "auto");
  EXPECT_EQ(choice.isa, Isa::avx512_core_fp16);
  EXPECT_NE(choice.reason.find("ARCH_REQ_XCOMP_PERM"), std::string::npos) << choice.reason;
}

TEST(CpuIsa, CapLowersTheChoiceAndAcceptsEveryRungsName) {
  EXPECT_EQ(choose_isa(sapphire_rapids(), "avx512_core_bf16").isa, Isa::avx512_core_bf16);
  EXPECT_EQ(choose_isa(sapphire_rapids(), "avx2").isa, Isa::avx2);
  EXPECT_EQ(choose_isa(sapphire_rapids(), "amx").isa, Isa::avx512_core_amx);
  EXPECT_EQ(choose_isa(granite_rapids(), "amx_fp16").isa, Isa::avx512_core_amx_fp16);
  EXPECT_EQ(choose_isa(skylake(), "avx2").reason.substr(0, 20), "capped at avx2 by de");
  for (Isa isa : isa_ladder()) {
    if (isa_supported(granite_rapids(), isa))
      EXPECT_EQ(choose_isa(granite_rapids(), isa_name(isa)).isa, isa) << isa_name(isa);
    else
      EXPECT_THROW(choose_isa(granite_rapids(), isa_name(isa)), DeviceUnavailableError)
          << isa_name(isa) << ": Granite Rapids has no AVX-VNNI-INT8";
  }
  EXPECT_THROW(choose_isa(zen4(), "avx512"), ConfigError);
}

TEST(CpuIsa, AskingForARungTheCpuLacksIsAClearError) {
  try {
    choose_isa(zen4(), "amx");
    FAIL() << "expected DeviceUnavailableError";
  } catch (const DeviceUnavailableError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("amx is not usable on this CPU"), std::string::npos) << text;
    EXPECT_NE(text.find("best it offers is avx512_core_bf16"), std::string::npos) << text;
  }
  EXPECT_THROW(choose_isa(skylake(), "avx512_core_bf16"), DeviceUnavailableError);
  EXPECT_THROW(choose_isa(skylake(), "avx2_vnni"), DeviceUnavailableError);
}

TEST(CpuIsa, DetectionOnThisMachineIsConsistent) {
  const auto features = detect_cpu_features();
  EXPECT_LE(features.amx_permitted, features.amx);
  EXPECT_LE(features.avx512_bf16, features.avx512_core);
  EXPECT_LE(features.avx512_vnni, features.avx512_core);
  EXPECT_LE(features.avx_vnni, features.avx2);
  const auto choice = choose_isa(features, "auto");
  EXPECT_FALSE(choice.reason.empty());
  EXPECT_TRUE(isa_supported(features, choice.isa));
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
