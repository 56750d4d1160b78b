#pragma once
// The CPU plugin's ISA tiers as test parameters: every rung of the ladder
// (plugins/cpu/cpu_isa.hpp) runs on any host at or above it, through
// device.isa (oneDNN's cap is process-wide, and every ctest entry is a
// process of its own); a rung above the host is skipped by name.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cpu_isa.hpp"

namespace polyhal::test {

/// Every rung's name, highest first, as device.isa spells it.
inline std::vector<std::string> cpu_tier_names() {
  std::vector<std::string> names;
  for (cpu::Isa isa : cpu::isa_ladder()) names.emplace_back(cpu::isa_name(isa));
  return names;
}

/// Why this host cannot run `tier`, or nothing when it can.
inline std::optional<std::string> tier_above_host(const std::string& tier) {
  const auto features = cpu::detect_cpu_features();
  for (cpu::Isa isa : cpu::isa_ladder()) {
    if (tier != cpu::isa_name(isa) || cpu::isa_supported(features, isa)) continue;
    try {
      cpu::choose_isa(features, tier);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }
  return std::nullopt;
}

/// gtest's parameter names: the tier itself.
inline std::string tier_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace polyhal::test

/// Skips the current test, naming the tier and why, when the host lacks it.
#define POLYHAL_SKIP_TIER_ABOVE_HOST(tier)                         \
  if (const auto why_not = ::polyhal::test::tier_above_host(tier)) \
  GTEST_SKIP() << "tier " << (tier) << " is above this CPU: " << *why_not
