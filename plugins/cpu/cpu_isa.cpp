#include "cpu_isa.hpp"

#include <cpuid.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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

bool bit(unsigned word, int n) {
  return (word >> n) & 1u;
}

std::string why_not(const CpuFeatures& f, Isa isa) {
  switch (isa) {
    case Isa::avx512_core_amx_fp16:
      if (f.amx && !f.amx_permitted) break;
      return "no AMX-FP16 (needs Granite Rapids or newer)";
    case Isa::avx512_core_amx:
      if (f.amx && !f.amx_permitted) break;
      return "no AMX-TILE/AMX-BF16 (needs Sapphire Rapids or newer)";
    case Isa::avx512_core_fp16:
      return "no AVX512_FP16 (needs Sapphire Rapids or newer)";
    case Isa::avx512_core_bf16:
      return "no AVX512_BF16 (needs Cooper Lake, AMD Zen 4 or newer)";
    case Isa::avx512_core_vnni:
      return "no AVX512_VNNI (needs Cascade Lake, Ice Lake, AMD Zen 4 or newer)";
    case Isa::avx512_core:
      return "no AVX-512 (or the OS does not save its state)";
    case Isa::avx2_vnni_2:
      return "no AVX-VNNI-INT8/AVX-NE-CONVERT (needs Sierra Forest, Arrow Lake or newer)";
    case Isa::avx2_vnni:
      return "no AVX-VNNI (needs Alder Lake, Sapphire Rapids, AMD Zen 5 or newer)";
    case Isa::avx2:
      return "no AVX2";
    case Isa::reference:
      return {};
  }
  return "the CPU has AMX but the kernel refused ARCH_REQ_XCOMP_PERM (Linux >= 5.16 needed)";
}

Isa best_supported(const CpuFeatures& f) {
  for (Isa isa : isa_ladder())
    if (isa_supported(f, isa)) return isa;
  return Isa::reference;
}

bool at_least(Isa isa, Isa rung) {
  return isa <= rung;
}

/// The cost of an emulated precision, from the CPUs it was measured on.
constexpr const char* kBf16EmulatedCost =
    "oneDNN converts bf16 to f32 in software around its f32 kernels: measured 2.9x slower than "
    "f32 (BERT-base inference, oneDNN capped at avx512_core_vnni on an AMD Zen 4) and 3.3x "
    "(BERT-mini, Cascade Lake); f32 is faster here";

PrecisionMode bf16_mode(const CpuFeatures& f, Isa isa) {
  if (at_least(isa, Isa::avx512_core_amx))
    return {"bf16", PrecisionSupport::native, "AMX-BF16 tiles"};
  if (at_least(isa, Isa::avx512_core_bf16))
    return {"bf16", PrecisionSupport::native, "AVX512_BF16 vdpbf16ps"};
  if (isa_has_avx512(isa)) {
    return {"bf16", PrecisionSupport::emulated,
            fmt::format("{}: {}{}",
                        f.avx512_bf16 ? "device.isa caps oneDNN below AVX512_BF16"
                                      : "this CPU has no AVX512_BF16",
                        kBf16EmulatedCost,
                        f.avx512_bf16 ? " (lift the device.isa cap for native bf16)" : "")};
  }
  return {"bf16", PrecisionSupport::none,
          "oneDNN 2.6 computes bf16 only with AVX-512; use f32 (or mixed, which picks it)"};
}

PrecisionMode f16_mode(Isa isa, int onednn_major) {
  const bool hardware = at_least(isa, Isa::avx512_core_fp16);
  if (hardware && onednn_major >= 3)
    return {"f16", PrecisionSupport::native,
            isa == Isa::avx512_core_amx_fp16 ? "AMX-FP16 tiles in the encoder's linears"
                                             : "AVX512_FP16 in the encoder's linears"};
  return {"f16", PrecisionSupport::emulated,
          fmt::format("f16 products in the encoder's linears, rounded to f16 and multiplied by "
                      "the f32 kernel ({}): f32 speed with f16 rounding; f32 (or bf16 where "
                      "native) is the better choice",
                      hardware ? fmt::format("oneDNN {} has no f16 matmul", onednn_major)
                               : std::string("no AVX512_FP16 or AMX-FP16 under this ISA"))};
}

PrecisionMode bf32_mode(const CpuFeatures& f, Isa isa) {
  PrecisionMode mode = bf16_mode(f, isa);
  mode.precision = "bf32";
  if (mode.support == PrecisionSupport::native) mode.why = "f32 tensors, products on " + mode.why;
  if (mode.support == PrecisionSupport::emulated)
    mode.why = "f32 tensors with bf16 products: " + mode.why;
  return mode;
}

}  // namespace

const std::vector<Isa>& isa_ladder() {
  static const std::vector<Isa> ladder{Isa::avx512_core_amx_fp16,
                                       Isa::avx512_core_amx,
                                       Isa::avx512_core_fp16,
                                       Isa::avx512_core_bf16,
                                       Isa::avx512_core_vnni,
                                       Isa::avx512_core,
                                       Isa::avx2_vnni_2,
                                       Isa::avx2_vnni,
                                       Isa::avx2,
                                       Isa::reference};
  return ladder;
}

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::avx512_core_amx_fp16:
      return "avx512_core_amx_fp16";
    case Isa::avx512_core_amx:
      return "avx512_core_amx";
    case Isa::avx512_core_fp16:
      return "avx512_core_fp16";
    case Isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case Isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case Isa::avx512_core:
      return "avx512_core";
    case Isa::avx2_vnni_2:
      return "avx2_vnni_2";
    case Isa::avx2_vnni:
      return "avx2_vnni";
    case Isa::avx2:
      return "avx2";
    case Isa::reference:
      return "reference";
  }
  return "?";
}

bool isa_has_avx512(Isa isa) noexcept {
  return at_least(isa, Isa::avx512_core);
}

bool isa_supported(const CpuFeatures& f, Isa isa) {
  const bool amx = f.amx && f.amx_permitted && f.amx_int8 && f.avx512_bf16 && f.avx512_vnni;
  switch (isa) {
    case Isa::avx512_core_amx_fp16:
      return amx && f.amx_fp16 && f.avx512_fp16;
    case Isa::avx512_core_amx:
      return amx;
    case Isa::avx512_core_fp16:
      return f.avx512_core && f.avx512_vnni && f.avx512_bf16 && f.avx512_fp16;
    case Isa::avx512_core_bf16:
      return f.avx512_core && f.avx512_vnni && f.avx512_bf16;
    case Isa::avx512_core_vnni:
      return f.avx512_core && f.avx512_vnni;
    case Isa::avx512_core:
      return f.avx512_core;
    case Isa::avx2_vnni_2:
      return f.avx2 && f.avx_vnni && f.avx_vnni_int8 && f.avx_ne_convert;
    case Isa::avx2_vnni:
      return f.avx2 && f.avx_vnni;
    case Isa::avx2:
      return f.avx2;
    case Isa::reference:
      return true;
  }
  return false;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = bit(ecx, 27);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6u) == 0x6u;          // XMM + YMM state
  const bool os_avx512 = (xcr0 & 0xe6u) == 0xe6u;     // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG + XTILEDATA
  unsigned max_leaf = 0;
  __cpuid(0, max_leaf, ebx, ecx, edx);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = os_avx && bit(ebx, 5);
  f.avx512_core = os_avx512 && bit(ebx, 16) && bit(ebx, 17) && bit(ebx, 30) && bit(ebx, 31);
  f.avx512_vnni = f.avx512_core && bit(ecx, 11);
  f.avx512_fp16 = f.avx512_core && bit(edx, 23);
  f.amx = os_amx && bit(edx, 24) && bit(edx, 22);
  f.amx_int8 = f.amx && bit(edx, 25);
  const unsigned subleaves = eax;
  if (subleaves >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx_vnni = f.avx2 && bit(eax, 4);
    f.avx512_bf16 = f.avx512_core && bit(eax, 5);
    f.amx_fp16 = f.amx && bit(eax, 21);
    f.avx_vnni_int8 = f.avx2 && bit(edx, 4);
    f.avx_ne_convert = f.avx2 && bit(edx, 5);
  }
  f.amx_permitted = f.amx && amx_permission_granted();
  return f;
}

Int8Choice int8_support(const CpuFeatures& f, Isa isa) {
  if (at_least(isa, Isa::avx512_core_amx)) return {true, "AMX-INT8", "AMX-INT8 tiles"};
  const std::string amx_capped =
      isa_supported(f, Isa::avx512_core_amx)
          ? fmt::format(" (AMX-INT8 is capped off by device.isa {})", isa_name(isa))
          : std::string();
  if (at_least(isa, Isa::avx512_core_vnni))
    return {true, "AVX512-VNNI", "AVX512_VNNI vpdpbusd" + amx_capped};
  if (isa == Isa::avx2_vnni || isa == Isa::avx2_vnni_2)
    return {true, "AVX-VNNI", "AVX-VNNI vpdpbusd (256-bit)" + amx_capped};
  if (isa == Isa::reference)
    return {false, {}, "device.isa reference runs no SIMD int8 kernel; use f32"};
  // Without VNNI oneDNN multiplies u8 x s8 pairs with vpmaddubsw, whose s16
  // pair sums saturate with eight-bit weights: up to 0.88 off the exact
  // result on one BERT linear (tests/cpu_tiers_test.cpp). With weights in
  // [-63, 63] every pair sum fits (int8.hpp), and int8 still ran 1.37x f32.
  const Isa vnni = isa_has_avx512(isa) ? Isa::avx512_core_vnni : Isa::avx2_vnni;
  const std::string cause =
      isa_supported(f, vnni) || isa_supported(f, Isa::avx512_core_vnni)
          ? fmt::format(
                "device.isa {} caps oneDNN below VNNI, which this CPU has; "
                "device.isa auto (or a VNNI rung) keeps eight-bit weights",
                isa_name(isa))
          : fmt::format("this CPU has no VNNI ({})", isa_has_avx512(isa)
                                                         ? "AVX512_VNNI needs Cascade Lake or newer"
                                                         : "AVX-VNNI needs Alder Lake or newer");
  return {true, isa_has_avx512(isa) ? "AVX-512" : "AVX2",
          fmt::format("vpmaddubsw with seven-bit weights, [-63, 63], so that its 16-bit pair sums "
                      "are exact: {}",
                      cause),
          kInt7Max};
}

std::vector<PrecisionMode> precision_modes(const CpuFeatures& features, Isa isa, int onednn_major) {
  std::vector<PrecisionMode> modes;
  modes.push_back({"f32", PrecisionSupport::native,
                   isa == Isa::reference
                       ? "oneDNN's SSE4.1 kernels (device.isa reference)"
                       : fmt::format("{} FMA", isa_has_avx512(isa) ? "AVX-512" : "AVX2")});
  modes.push_back(bf16_mode(features, isa));
  modes.push_back(f16_mode(isa, onednn_major));
  modes.push_back(bf32_mode(features, isa));
  const Int8Choice int8 = int8_support(features, isa);
  modes.push_back({"int8", int8.runs ? PrecisionSupport::native : PrecisionSupport::none,
                   int8.runs ? int8.engine + ": " + int8.reason : int8.reason});
  return modes;
}

std::vector<std::string> isa_option_names() {
  std::vector<std::string> names{"auto"};
  for (Isa isa : isa_ladder()) names.emplace_back(isa_name(isa));
  names.emplace_back("amx");
  names.emplace_back("amx_fp16");
  return names;
}

IsaChoice choose_isa(const CpuFeatures& features, const std::string& requested) {
  const std::string cap = requested == "amx"        ? "avx512_core_amx"
                          : requested == "amx_fp16" ? "avx512_core_amx_fp16"
                                                    : requested;
  const auto& ladder = isa_ladder();
  std::size_t start = 0;
  if (cap != "auto") {
    while (start < ladder.size() && cap != isa_name(ladder[start])) ++start;
    if (start == ladder.size()) {
      const auto names = isa_option_names();
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ConfigError(
          fmt::format("key 'device.isa': unknown ISA \"{}\"; expected one of {}", requested, list));
    }
    if (!isa_supported(features, ladder[start])) {
      throw DeviceUnavailableError(fmt::format(
          "device.isa: {} is not usable on this CPU: {}; the best it offers is {}", requested,
          why_not(features, ladder[start]), isa_name(best_supported(features))));
    }
  }
  std::string skipped;
  for (std::size_t i = start; i < ladder.size(); ++i) {
    if (isa_supported(features, ladder[i])) {
      IsaChoice choice{ladder[i], {}};
      choice.reason =
          cap == "auto" ? "best available" : fmt::format("capped at {} by device.isa", requested);
      if (!skipped.empty()) choice.reason += "; " + skipped;
      return choice;
    }
    skipped += fmt::format("{}{}: {}", skipped.empty() ? "" : "; ", isa_name(ladder[i]),
                           why_not(features, ladder[i]));
  }
  return {Isa::reference, "no SIMD ISA available"};
}

}  // namespace polyhal::cpu
