#pragma once
// Published figures for Habana Gaudi generations, each in an 8-card server
// (HLS-1, HLS-Gaudi2, Gaudi 3 baseboard). Sources: Habana/Intel product
// briefs and white papers. A peak the vendor never published is 0 and the
// model then gives no speed estimate for that dtype rather than invent one.
#include <cstdint>
#include <string>
#include <vector>

#include "polyhal/dtype.hpp"

namespace polyhal::gaudi {

struct GaudiGeneration {
  std::string name;     // "gaudi2"
  std::string product;  // "Gaudi2 (HL-225)"
  std::string server;   // "HLS-Gaudi2"
  std::uint64_t hbm_bytes;
  double hbm_bandwidth;   // bytes/s
  double peak_bf16;       // MME FLOP/s, 0 = not published
  double peak_f32;        // FLOP/s, 0 = not published
  int roce_ports;         // integrated RoCE ports per card
  double roce_port_gbps;  // per port
  int scale_out_ports;    // of those, ports leaving the server
  double host_link;       // host interface, bytes/s per card (PCIe x16)
  std::vector<DType> dtypes;
};

const std::vector<GaudiGeneration>& gaudi_generations();

inline constexpr int kCardsPerServer = 8;
/// Servers a model joins at most: a bound on what a config can make the
/// model open (512 cards); the cost model itself has no other limit.
inline constexpr int kMaxServers = 64;

}  // namespace polyhal::gaudi
