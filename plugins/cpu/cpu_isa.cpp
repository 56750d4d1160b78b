#include "cpu_isa.hpp"

#include <cpuid.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>

#include "polyhal/error.hpp"

namespace polyhal::cpu {
namespace {

constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: request an XSAVE feature
constexpr int kXfeatureXtileData = 18;     // AMX tile data

std::uint64_t xgetbv0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

bool amx_permission_granted() {
  // Since Linux 5.16 a process must ask before using AMX tile data; without
  // it the first tile instruction kills the process.
  return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

constexpr std::array kOrder{Isa::amx, Isa::avx512_core_bf16, Isa::avx512_core, Isa::avx2,
                            Isa::reference};

bool supported(const CpuFeatures& f, Isa isa) {
  switch (isa) {
    case Isa::amx:
      return f.amx && f.amx_permitted && f.avx512_bf16;
    case Isa::avx512_core_bf16:
      return f.avx512_core && f.avx512_bf16;
    case Isa::avx512_core:
      return f.avx512_core;
    case Isa::avx2:
      return f.avx2;
    case Isa::reference:
      return true;
  }
  return false;
}

std::string why_not(const CpuFeatures& f, Isa isa) {
  if (isa == Isa::amx && f.amx && !f.amx_permitted) {
    return "the CPU has AMX but the kernel refused ARCH_REQ_XCOMP_PERM (Linux >= 5.16 needed)";
  }
  if (isa == Isa::amx) return "no AMX-TILE/AMX-BF16 (needs Sapphire Rapids or newer)";
  if (isa == Isa::avx512_core_bf16) return "no AVX512_BF16";
  if (isa == Isa::avx512_core) return "no AVX-512 (or the OS does not save its state)";
  return "no AVX2";
}

}  // namespace

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::amx:
      return "amx";
    case Isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case Isa::avx512_core:
      return "avx512_core";
    case Isa::avx2:
      return "avx2";
    case Isa::reference:
      return "reference";
  }
  return "?";
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u;
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6u) == 0x6u;          // XMM + YMM state
  const bool os_avx512 = (xcr0 & 0xe6u) == 0xe6u;     // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG + XTILEDATA
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = os_avx && ((ebx >> 5) & 1u);
  const bool avx512f = (ebx >> 16) & 1u, avx512dq = (ebx >> 17) & 1u;
  const bool avx512bw = (ebx >> 30) & 1u, avx512vl = (ebx >> 31) & 1u;
  f.avx512_core = os_avx512 && avx512f && avx512dq && avx512bw && avx512vl;
  const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
  f.amx = os_amx && amx_tile && amx_bf16;
  f.amx_int8 = f.amx && ((edx >> 25) & 1u);
  f.avx512_vnni = f.avx512_core && ((ecx >> 11) & 1u);
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx512_bf16 = f.avx512_core && ((eax >> 5) & 1u);
  f.amx_permitted = f.amx && amx_permission_granted();
  return f;
}

Int8Choice int8_support(const CpuFeatures& f, Isa isa) {
  if (isa == Isa::amx && f.amx_int8)
    return {true, "AMX-INT8", "AMX-INT8 tiles (device.isa allows amx)"};
  if ((isa == Isa::amx || isa == Isa::avx512_core_bf16) && f.avx512_vnni) {
    return {true, "AVX512-VNNI",
            isa == Isa::amx ? "AVX512-VNNI (the CPU has AMX-BF16 but not AMX-INT8)"
                            : fmt::format("AVX512-VNNI vpdpbusd{}",
                                          f.amx_int8 ? " (AMX-INT8 needs device.isa amx or auto)"
                                                     : "; no AMX-INT8 on this CPU")};
  }
  if (!f.avx512_vnni)
    return {
        false, {}, "this CPU has no AVX512-VNNI (nor AMX-INT8): int8 needs Cascade Lake or newer"};
  return {
      false,
      {},
      fmt::format("device.isa {} caps oneDNN below AVX512-VNNI; int8 needs avx512_core_bf16, amx "
                  "or auto",
                  isa_name(isa))};
}

IsaChoice choose_isa(const CpuFeatures& features, const std::string& cap) {
  std::size_t start = 0;
  if (cap != "auto") {
    while (start < kOrder.size() && cap != isa_name(kOrder[start])) ++start;
    if (start == kOrder.size()) {
      throw ConfigError(fmt::format("key 'device.isa': unknown ISA \"{}\"", cap));
    }
    if (!supported(features, kOrder[start])) {
      Isa best = Isa::reference;
      for (Isa isa : kOrder) {
        if (supported(features, isa)) {
          best = isa;
          break;
        }
      }
      throw DeviceUnavailableError(
          fmt::format("device.isa: {} is not usable on this CPU: {}; the best it offers is {}", cap,
                      why_not(features, kOrder[start]), isa_name(best)));
    }
  }
  std::string skipped;
  for (std::size_t i = start; i < kOrder.size(); ++i) {
    if (supported(features, kOrder[i])) {
      IsaChoice choice{kOrder[i], {}};
      choice.reason =
          cap == "auto" ? "best available" : fmt::format("capped at {} by device.isa", cap);
      if (!skipped.empty()) choice.reason += "; " + skipped;
      return choice;
    }
    skipped += fmt::format("{}{}: {}", skipped.empty() ? "" : "; ", isa_name(kOrder[i]),
                           why_not(features, kOrder[i]));
  }
  return {Isa::reference, "no SIMD ISA available"};
}

}  // namespace polyhal::cpu
