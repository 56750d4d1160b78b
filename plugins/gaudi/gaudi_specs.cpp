#include "gaudi_specs.hpp"

namespace polyhal::gaudi {

const std::vector<GaudiGeneration>& gaudi_generations() {
  // HBM stacks are binary: the datasheets' 32, 96 and 128 GB are GiB.
  constexpr std::uint64_t GiB = 1ull << 30;
  static const std::vector<GaudiGeneration> generations{
      {"gaudi",
       "Gaudi (HL-205)",
       "HLS-1",
       32 * GiB,
       1.0e12,
       0.0,
       0.0,
       10,
       100,
       3,
       31.5e9,  // PCIe 4.0 x16
       {DType::f32, DType::bf16}},
      {"gaudi2",
       "Gaudi2 (HL-225)",
       "HLS-Gaudi2",
       96 * GiB,
       2.45e12,
       432e12,
       0.0,
       24,
       100,
       3,
       31.5e9,  // PCIe 4.0 x16
       {DType::f32, DType::bf16, DType::f16}},
      {"gaudi3",
       "Gaudi 3 (HL-325L)",
       "Gaudi 3 8-card baseboard",
       128 * GiB,
       3.7e12,
       1835e12,
       0.0,
       24,
       200,
       3,
       63e9,  // PCIe 5.0 x16
       {DType::f32, DType::bf16, DType::f16}},
  };
  return generations;
}

}  // namespace polyhal::gaudi
