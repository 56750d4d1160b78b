#pragma once
// The one place that asks the CPU what it is and decides which instruction
// set oneDNN may use: an ordered ladder of the tiers oneDNN distinguishes,
// highest first, reference last. Everything else reads the IsaChoice, and
// what each precision runs on under it (precision_modes).
#include <string>
#include <vector>

#include "polyhal/device.hpp"
#include "polyhal/int8.hpp"

namespace polyhal::cpu {

/// What the CPU and the OS offer (CPUID, XCR0, and the kernel's AMX grant).
struct CpuFeatures {
  bool avx2 = false;
  bool avx_vnni = false;        // VEX vpdpbusd (Alder Lake, Sapphire Rapids, Zen 5)
  bool avx_vnni_int8 = false;   // VEX s8 x s8 dot products (Sierra Forest, Arrow Lake)
  bool avx_ne_convert = false;  // VEX bf16/f16 loads and conversions
  bool avx512_core = false;     // F, BW, VL, DQ and the OS saves ZMM state
  bool avx512_vnni = false;     // vpdpbusd: u8 x s8 dot products into s32
  bool avx512_bf16 = false;     // vdpbf16ps: bf16 dot products into f32
  bool avx512_fp16 = false;     // f16 arithmetic (Sapphire Rapids and newer)
  bool amx = false;             // AMX-TILE + AMX-BF16 and the OS saves tile state
  bool amx_int8 = false;        // AMX-INT8 (with the tile state above)
  bool amx_fp16 = false;        // AMX-FP16 (Granite Rapids)
  bool amx_permitted = false;   // the kernel granted ARCH_REQ_XCOMP_PERM
};

/// Reads CPUID/XGETBV and asks the kernel for AMX permission.
CpuFeatures detect_cpu_features();

/// The tiers oneDNN distinguishes, highest first, as `device.isa` spells
/// them. Not every CPU's tiers form a chain (a Skylake has avx512_core but
/// not avx2_vnni): a cap starts the search at its rung and takes the first
/// rung below it the CPU has.
enum class Isa {
  avx512_core_amx_fp16,
  avx512_core_amx,
  avx512_core_fp16,
  avx512_core_bf16,
  avx512_core_vnni,
  avx512_core,
  avx2_vnni_2,
  avx2_vnni,
  avx2,
  reference,
};
const char* isa_name(Isa isa) noexcept;
/// Every rung, highest first.
const std::vector<Isa>& isa_ladder();
/// Whether this CPU can run `isa` (its instructions, the OS's state, AMX's grant).
bool isa_supported(const CpuFeatures& features, Isa isa);
/// Whether `isa` lets oneDNN and our own loops use 512-bit registers.
bool isa_has_avx512(Isa isa) noexcept;

struct IsaChoice {
  Isa isa = Isa::reference;
  std::string reason;  // for `polyhal devices` and --log-level debug
};

/// Whether int8 linears (LinearMath::int8) run under `isa`, and on what.
struct Int8Choice {
  bool runs = false;
  std::string engine;           // "AMX-INT8", "AVX512-VNNI", "AVX-VNNI", "AVX-512" or "AVX2"
  std::string reason;           // why, or why not (for the refusal and `polyhal devices`)
  float weight_max = kInt8Max;  // kInt8Max, or kInt7Max without VNNI (int8.hpp)
};
Int8Choice int8_support(const CpuFeatures& features, Isa isa);

/// How each precision of model.precision (f32, bf16, f16, bf32, int8) runs
/// under `isa` on this CPU: natively, emulated (and at what cost), or not at
/// all, each with the reason. `onednn_major` is the major version of the
/// oneDNN the plugin runs (f16 products need oneDNN 3).
std::vector<PrecisionMode> precision_modes(const CpuFeatures& features, Isa isa, int onednn_major);

/// Picks the best ISA at or below `cap` ("auto" = no cap; "amx" and
/// "amx_fp16" are short for the avx512_core_ names). Throws ConfigError for
/// a name that is no rung, DeviceUnavailableError if `cap` names an ISA this
/// CPU cannot run, with the best one it can.
IsaChoice choose_isa(const CpuFeatures& features, const std::string& cap);

/// The names `device.isa` accepts, "auto" first.
std::vector<std::string> isa_option_names();

}  // namespace polyhal::cpu
