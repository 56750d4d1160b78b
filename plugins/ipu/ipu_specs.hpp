#pragma once
// Published figures for the Graphcore GC200 (Mk2) IPU and the IPU-POD
// systems built from IPU-M2000 machines (4 IPUs each). Sources: Graphcore
// IPU-M2000 and IPU-POD datasheets. Anything not from a datasheet is marked
// as a modelling assumption where it is used.
#include <cstdint>
#include <string>
#include <vector>

namespace polyhal::ipu {

struct Gc200Spec {
  static constexpr int kTiles = 1472;
  static constexpr std::uint64_t kTileMemoryBytes = 624 * 1024;             // 624 KiB SRAM per tile
  static constexpr std::uint64_t kMemoryBytes = kTiles * kTileMemoryBytes;  // ~900 MB
  static constexpr double kPeakF16Flops = 250e12;      // FP16.16 AI compute per IPU
  static constexpr double kPeakF32Flops = 62.5e12;     // FP32 per IPU
  static constexpr double kMemoryBandwidth = 47.5e12;  // In-Processor-Memory, bytes/s
  static constexpr double kIpuLinkBandwidth = 320e9;   // chip-to-chip, bytes/s
  static constexpr int kThreadsPerTile = 6;
};

/// An IPU generation: the GC200 Mk2 of the IPU-M2000, or the Bow IPU of the
/// Bow-2000 (the same tiles and SRAM, a higher clock through wafer-on-wafer
/// power delivery). Sources: the IPU-M2000 and Bow-2000 datasheets.
struct IpuGeneration {
  std::string name;                // "mk2"
  std::string product;             // "GC200 Mk2 IPU"
  std::string machine;             // "IPU-M2000"
  double peak_f16;                 // FLOP/s, FP16.16 per IPU
  double peak_f32;                 // FLOP/s per IPU
  double memory_bandwidth;         // In-Processor-Memory, bytes/s
  std::uint64_t streaming_memory;  // per IPU: the machine's maximum DDR over its 4 IPUs
};
const std::vector<IpuGeneration>& ipu_generations();

/// Streaming Memory bandwidth per IPU for optimizer state kept there
/// (modelling assumption: the machines' DDR4 through the IPU-Gateway; not a
/// datasheet figure).
inline constexpr double kStreamingBandwidth = 20e9;

/// Host links per IPU: an IPU-M2000 or Bow-2000 reaches its host server over
/// the IPU-Gateway's 2 x 100 Gb/s RoCE host links, shared by its 4 IPUs
/// (datasheets).
inline constexpr double kHostLinkBandwidth = 2 * 100e9 / 8 / 4;

/// An IPU-POD system: how many M2000 machines, hence IPUs.
struct PodSystem {
  std::string name;  // "POD16"
  int machines = 1;  // IPU-M2000s
  int ipus() const { return machines * 4; }
};

/// The systems users name in configs (IPU-POD4 is one IPU-M2000).
const std::vector<PodSystem>& pod_systems();

}  // namespace polyhal::ipu
