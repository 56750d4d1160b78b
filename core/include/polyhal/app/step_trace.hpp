#pragma once
/// @file step_trace.hpp
/// Step traces (`polyhal run --profile START:END`, as Habana's
/// `--profile 30,31`): optimizer steps START..END written as one Chrome
/// trace-event JSON file that chrome://tracing and ui.perfetto.dev open.
///
/// On real hardware the trace is measured: every kernel run (op, shapes,
/// dtype, the implementation that ran) on a track per replica and pipeline
/// stage, inside the host phases (step, data, upload, forward, backward,
/// all-reduce, optimizer, checkpoint, evaluation). On a device model it is
/// the model's estimated timeline instead (the 1F1B schedule with its
/// bubbles, host I/O, all-reduce, optimizer), and the metadata and every
/// track name say "estimated". Only the window is recorded, so a long run's
/// trace stays small, and recording never changes what the run computes.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// Optimizer steps first..last (1-based, inclusive).
struct StepWindow {
  std::int64_t first = 1, last = 1;
  bool contains(std::int64_t step) const noexcept { return step >= first && step <= last; }
  std::int64_t size() const noexcept { return last - first + 1; }
};

/// "30:31" (steps 30 and 31) or "30" (step 30 alone). Throws ConfigError
/// naming `where` (the flag) for anything else, a step below 1 or an end
/// before the start.
StepWindow parse_step_window(std::string_view text, std::string_view where);

class TraceLane;
class StepTrace;

/// One op of a program as an estimated trace shows it.
struct EstimatedSlice {
  std::string name;     ///< the op's kind
  nlohmann::json args;  ///< output, kernel shapes, dtype
  double seconds = 0;   ///< the device model's estimate
};

/// One track of the trace (a "thread" in the viewer). Only one thread
/// writes a track; slices on it nest or follow each other.
class TraceTrack {
 public:
  using Clock = std::chrono::steady_clock;

  /// Whether this track's lane is on a step inside the window.
  bool recording() const noexcept;
  /// A measured slice [start, end) (ignored unless recording()).
  void slice(std::string name, std::string_view category, Clock::time_point start,
             Clock::time_point end, nlohmann::json args = nullptr);
  /// A slice on the estimated timeline: `start_us` microseconds from its
  /// origin (recorded whatever the lane's step: the caller lays the window out).
  void slice_at(std::string name, std::string_view category, double start_us, double duration_us,
                nlohmann::json args = nullptr);

  /// A measured slice from construction to destruction.
  class Scope {
   public:
    Scope(TraceTrack* track, std::string name, std::string_view category,
          nlohmann::json args = nullptr);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TraceTrack* track_;
    std::string name_;
    std::string_view category_;
    nlohmann::json args_;
    Clock::time_point start_;
  };

 private:
  friend class TraceLane;

  /// One op of a program as an estimated trace shows it.
  struct EstimatedSlice {
    std::string name;     ///< the op's kind
    nlohmann::json args;  ///< output, kernel shapes, dtype
    double seconds = 0;   ///< the device model's estimate
  };
  friend class StepTrace;
  TraceTrack(TraceLane& lane, std::string name, int id)
      : lane_(lane), name_(std::move(name)), id_(id) {}
  void add(nlohmann::json event);

  TraceLane& lane_;
  std::string name_;
  int id_;
  std::vector<nlohmann::json> events_;
};

/// A replica's tracks (its stages and host phases) and the step it is on.
class TraceLane {
 public:
  /// The optimizer step this replica works on; its tracks record while it
  /// is inside the window.
  void set_step(std::int64_t step) noexcept { step_.store(step, std::memory_order_relaxed); }
  bool recording() const noexcept;
  /// The track `name` of this lane, made on first use; lanes are owned by
  /// their StepTrace, tracks by their lane (references stay valid).
  TraceTrack& track(const std::string& name);
  int replica() const noexcept { return replica_; }

 private:
  friend class StepTrace;
  friend class TraceTrack;
  TraceLane(StepTrace& trace, int replica) : trace_(trace), replica_(replica) {}

  StepTrace& trace_;
  int replica_;
  std::atomic<std::int64_t> step_{0};
  std::mutex mutex_;
  std::vector<std::unique_ptr<TraceTrack>> tracks_;
};

/// The whole trace of one process.
class StepTrace {
 public:
  enum class Timeline : std::uint8_t { measured, estimated };
  /// Past this many events a trace stops recording (and says so in its
  /// metadata): about 100 MB of JSON.
  static constexpr std::size_t kMaxEvents = 500'000;

  /// `process`: this process's rank (the trace's pid); `process_name`
  /// labels it ("polyhal cpu rank 0", "ipu model").
  StepTrace(StepWindow window, Timeline timeline, int process, std::string process_name);
  ~StepTrace();
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  const StepWindow& window() const noexcept { return window_; }
  Timeline timeline() const noexcept { return timeline_; }
  bool estimated() const noexcept { return timeline_ == Timeline::estimated; }
  /// Replica `replica`'s lane, made on first use (thread-safe).
  TraceLane& lane(int replica);
  /// A key of the trace's metadata ("otherData").
  void set_metadata(const std::string& key, nlohmann::json value);
  /// Slices recorded so far.
  std::size_t event_count() const noexcept { return events_.load(); }
  /// The trace as one JSON object ({traceEvents, displayTimeUnit, otherData}),
  /// tracks named and sorted, slices in time order per track.
  nlohmann::json to_json() const;
  /// Writes to_json() to `file` atomically (never half-written).
  void write(const std::filesystem::path& file) const;

 private:
  friend class TraceTrack;
  friend class TraceLane;
  bool reserve_event();

  StepWindow window_;
  Timeline timeline_;
  int process_;
  std::string process_name_;
  TraceTrack::Clock::time_point origin_;
  std::atomic<std::size_t> events_{0};
  std::atomic<bool> truncated_{false};
  mutable std::mutex mutex_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<std::unique_ptr<TraceLane>> lanes_;
};

}  // namespace polyhal
