#pragma once
// The one place that asks the CPU what it is and decides which instruction
// set oneDNN may use (ordered candidates: AMX > AVX-512 bf16 > AVX-512 > AVX2,
// reference last). Everything else reads the IsaChoice.
#include <string>

namespace polyhal::cpu {

/// What the CPU and the OS offer.
struct CpuFeatures {
  bool avx2 = false;
  bool avx512_core = false;  // F, BW, VL, DQ and the OS saves ZMM state
  bool avx512_bf16 = false;
  bool amx = false;            // AMX-TILE + AMX-BF16 and the OS saves tile state
  bool amx_permitted = false;  // the kernel granted ARCH_REQ_XCOMP_PERM
  bool avx512_vnni = false;    // vpdpbusd: u8 x s8 dot products into s32
  bool amx_int8 = false;       // AMX-INT8 (with the tile state above)
};

/// Reads CPUID/XGETBV and asks the kernel for AMX permission.
CpuFeatures detect_cpu_features();

/// ISA names as the `isa` option spells them, highest first.
enum class Isa { amx, avx512_core_bf16, avx512_core, avx2, reference };
const char* isa_name(Isa isa) noexcept;

struct IsaChoice {
  Isa isa = Isa::reference;
  std::string reason;  // for `polyhal devices` and --log-level debug
};

/// Whether int8 linears (LinearMath::int8) run under `isa`, and on what.
struct Int8Choice {
  bool runs = false;
  std::string engine;  // "AVX512-VNNI" or "AMX-INT8"
  std::string reason;  // why, or why not (for the refusal and `polyhal devices`)
};
Int8Choice int8_support(const CpuFeatures& features, Isa isa);

/// Picks the best ISA at or below `cap` ("auto" = no cap). Throws
/// DeviceUnavailableError if `cap` names an ISA this CPU cannot run, with the
/// best one it can.
IsaChoice choose_isa(const CpuFeatures& features, const std::string& cap);

}  // namespace polyhal::cpu
