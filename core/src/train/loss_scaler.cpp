#include "polyhal/app/loss_scaler.hpp"

#include <fmt/format.h>

#include <cmath>

#include "polyhal/error.hpp"

namespace polyhal {

LossScaler::LossScaler(Mode mode, double scale, std::int64_t growth_interval)
    : mode_(mode), scale_(mode == Mode::none ? 1.0 : scale), growth_interval_(growth_interval) {
  if (mode_ != Mode::none && !(scale_ > 0.0 && std::isfinite(scale_)))
    throw ConfigError(fmt::format("loss scale must be a positive number, got {}", scale_));
  if (growth_interval_ < 1)
    throw ConfigError(
        fmt::format("loss scale growth interval must be >= 1, got {}", growth_interval_));
}

void LossScaler::update(bool skipped) {
  if (skipped) {
    if (mode_ == Mode::dynamic) scale_ /= 2;
    good_steps_ = 0;
  } else if (mode_ == Mode::dynamic && ++good_steps_ % growth_interval_ == 0) {
    scale_ *= 2;
  }
}

std::map<std::string, std::string> LossScaler::metadata() const {
  return {{"loss_scale", fmt::format("{:.17g}", scale_)},
          {"good_steps", std::to_string(good_steps_)}};
}

void LossScaler::restore(const std::map<std::string, std::string>& metadata) {
  const auto number = [&](const char* key, auto parse) {
    const auto it = metadata.find(key);
    if (it == metadata.end()) return;
    try {
      std::size_t used = 0;
      parse(it->second, used);
      if (used != it->second.size()) throw std::invalid_argument(key);
    } catch (const std::exception&) {
      throw ConfigError(
          fmt::format("checkpoint metadata '{}': \"{}\" is not a number", key, it->second));
    }
  };
  number("loss_scale", [&](const std::string& text, std::size_t& used) {
    const double value = std::stod(text, &used);
    if (!(value > 0.0 && std::isfinite(value))) throw std::invalid_argument(text);
    scale_ = value;
  });
  number("good_steps", [&](const std::string& text, std::size_t& used) {
    const long long value = std::stoll(text, &used);
    if (value < 0) throw std::invalid_argument(text);
    good_steps_ = value;
  });
}

}  // namespace polyhal
