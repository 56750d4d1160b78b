// Device option values as the launcher checks them before a plugin sees them.
#include "polyhal/app/device_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>

namespace polyhal {

std::string check_option_value(const OptionSpec& spec, const std::string& value) {
  auto whole = [&](auto parsed) {
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    return ec == std::errc() && end == value.data() + value.size() && !value.empty();
  };
  switch (spec.type) {
    case OptionSpec::Type::integer:  // device options are counts: an int in every plugin
      return whole(std::int32_t{}) ? ""
                                   : fmt::format("expected an integer from {} to {}, got \"{}\"",
                                                 INT32_MIN, INT32_MAX, value);
    case OptionSpec::Type::number: {
      double parsed = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      const bool ok = ec == std::errc() && end == value.data() + value.size() && !value.empty() &&
                      std::isfinite(parsed);
      return ok ? "" : fmt::format("expected a finite number, got \"{}\"", value);
    }
    case OptionSpec::Type::boolean:
      return value == "true" || value == "false"
                 ? ""
                 : fmt::format("expected true or false, got \"{}\"", value);
    case OptionSpec::Type::choice:
      if (std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end())
        return "";
      return fmt::format("expected one of {}, got \"{}\"", fmt::join(spec.choices, ", "), value);
    case OptionSpec::Type::string:
      return "";
  }
  return "";
}

}  // namespace polyhal
