#pragma once
/// @file loss_scaler.hpp
/// Loss scaling for low-precision training, as the seeds' scalers: none, a
/// static scale (Graphcore's --loss-scaling), or dynamic (halve the scale
/// and skip the step on a gradient overflow; double it after a run of good
/// steps). Its state goes into checkpoints, so a resumed run continues with
/// the scale it stopped at.
#include <cstdint>
#include <map>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/dtype.hpp"

namespace polyhal {

class LossScaler {
 public:
  enum class Mode { none, fixed, dynamic };

  /// `scale` is ignored for Mode::none (the scale is then 1).
  LossScaler(Mode mode, double scale, std::int64_t growth_interval);

  Mode mode() const noexcept { return mode_; }
  double scale() const noexcept { return scale_; }
  std::int64_t good_steps() const noexcept { return good_steps_; }
  /// After an optimizer step: `skipped` when a gradient overflowed.
  void update(bool skipped);
  /// The state as checkpoint metadata ("loss_scale", "good_steps")...
  std::map<std::string, std::string> metadata() const;
  /// ...and back (keys absent: unchanged). Throws ConfigError for a value
  /// that is not a number, naming the key.
  void restore(const std::map<std::string, std::string>& metadata);

 private:
  Mode mode_;
  double scale_;
  std::int64_t growth_interval_;
  std::int64_t good_steps_ = 0;
};

}  // namespace polyhal
