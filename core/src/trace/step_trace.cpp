#include "polyhal/app/step_trace.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {

namespace {

std::int64_t parse_step(std::string_view text, std::string_view whole, std::string_view where) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value < 1)
    throw ConfigError(fmt::format(
        "{}: '{}' is not a step window: give START:END (optimizer steps from 1, e.g. 30:31) or "
        "one step",
        where, whole));
  return value;
}

}  // namespace

StepWindow parse_step_window(std::string_view text, std::string_view where) {
  const auto colon = text.find(':');
  StepWindow window;
  window.first = parse_step(text.substr(0, colon), text, where);
  window.last = colon == std::string_view::npos ? window.first
                                                : parse_step(text.substr(colon + 1), text, where);
  if (window.last < window.first)
    throw ConfigError(fmt::format("{}: '{}' ends at step {}, before it starts at step {}", where,
                                  text, window.last, window.first));
  return window;
}

bool TraceTrack::recording() const noexcept {
  return lane_.recording();
}

void TraceTrack::add(nlohmann::json event) {
  if (!lane_.trace_.reserve_event()) return;
  event["pid"] = lane_.trace_.process_;
  event["tid"] = id_;
  events_.push_back(std::move(event));
}

void TraceTrack::slice(std::string name, std::string_view category, Clock::time_point start,
                       Clock::time_point end, nlohmann::json args) {
  if (!recording()) return;
  const auto origin = lane_.trace_.origin_;
  slice_at(std::move(name), category,
           std::chrono::duration<double, std::micro>(start - origin).count(),
           std::chrono::duration<double, std::micro>(end - start).count(), std::move(args));
}

void TraceTrack::slice_at(std::string name, std::string_view category, double start_us,
                          double duration_us, nlohmann::json args) {
  nlohmann::json event = {{"name", std::move(name)},
                          {"cat", category},
                          {"ph", "X"},
                          {"ts", start_us},
                          {"dur", std::max(0.0, duration_us)}};
  if (!args.is_null()) event["args"] = std::move(args);
  add(std::move(event));
}

TraceTrack::Scope::Scope(TraceTrack* track, std::string name, std::string_view category,
                         nlohmann::json args)
    : track_(track && track->recording() ? track : nullptr),
      name_(std::move(name)),
      category_(category),
      args_(std::move(args)),
      start_(Clock::now()) {}

TraceTrack::Scope::~Scope() {
  if (track_) track_->slice(std::move(name_), category_, start_, Clock::now(), std::move(args_));
}

bool TraceLane::recording() const noexcept {
  return trace_.timeline_ == StepTrace::Timeline::measured &&
         trace_.window_.contains(step_.load(std::memory_order_relaxed));
}

TraceTrack& TraceLane::track(const std::string& name) {
  const std::lock_guard lock(mutex_);
  for (const auto& t : tracks_)
    if (t->name_ == name) return *t;
  // Track ids sort a replica's tracks together, in the order they were made.
  const int id = replica_ * 1000 + static_cast<int>(tracks_.size()) + 1;
  tracks_.push_back(std::unique_ptr<TraceTrack>(new TraceTrack(*this, name, id)));
  return *tracks_.back();
}

StepTrace::StepTrace(StepWindow window, Timeline timeline, int process, std::string process_name)
    : window_(window),
      timeline_(timeline),
      process_(process),
      process_name_(std::move(process_name)),
      origin_(TraceTrack::Clock::now()) {
  metadata_["timeline"] = timeline == Timeline::estimated ? "estimated" : "measured";
  metadata_["steps"] = {window.first, window.last};
  if (timeline == Timeline::estimated)
    metadata_["note"] =
        "estimated by polyhal's device model, not measured: no such device ran this trace";
}

StepTrace::~StepTrace() = default;

TraceLane& StepTrace::lane(int replica) {
  const std::lock_guard lock(mutex_);
  for (const auto& l : lanes_)
    if (l->replica_ == replica) return *l;
  lanes_.push_back(std::unique_ptr<TraceLane>(new TraceLane(*this, replica)));
  return *lanes_.back();
}

void StepTrace::set_metadata(const std::string& key, nlohmann::json value) {
  const std::lock_guard lock(mutex_);
  metadata_[key] = std::move(value);
}

bool StepTrace::reserve_event() {
  if (events_.fetch_add(1) < kMaxEvents) return true;
  events_.fetch_sub(1);
  if (!truncated_.exchange(true))
    spdlog::warn("--profile: the trace reached {} events and records no more; profile fewer steps",
                 kMaxEvents);
  return false;
}

nlohmann::json StepTrace::to_json() const {
  const std::lock_guard lock(mutex_);
  nlohmann::json events = nlohmann::json::array();
  const bool estimated = timeline_ == Timeline::estimated;
  events.push_back(
      {{"ph", "M"},
       {"name", "process_name"},
       {"pid", process_},
       {"tid", 0},
       {"args", {{"name", estimated ? process_name_ + " (estimated)" : process_name_}}}});
  for (const auto& lane : lanes_) {
    const std::lock_guard lane_lock(lane->mutex_);
    for (const auto& track : lane->tracks_) {
      events.push_back(
          {{"ph", "M"},
           {"name", "thread_name"},
           {"pid", process_},
           {"tid", track->id_},
           {"args", {{"name", estimated ? track->name_ + " (estimated)" : track->name_}}}});
      events.push_back({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", process_},
                        {"tid", track->id_},
                        {"args", {{"sort_index", track->id_}}}});
      // Slices are recorded when they end: an enclosing one comes after
      // those inside it. Viewers want each track by start time, outer first.
      // Equal start and length: the one recorded later encloses the other
      // (slices are recorded as they end, estimated ones children first).
      std::vector<const nlohmann::json*> order;
      order.reserve(track->events_.size());
      for (auto e = track->events_.rbegin(); e != track->events_.rend(); ++e) order.push_back(&*e);
      std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        const double ta = (*a)["ts"].template get<double>(), tb = (*b)["ts"].template get<double>();
        if (ta != tb) return ta < tb;
        return (*a)["dur"].template get<double>() > (*b)["dur"].template get<double>();
      });
      for (const auto* e : order) events.push_back(*e);
    }
  }
  nlohmann::json other = metadata_;
  if (truncated_) other["truncated"] = fmt::format("stopped at {} events", kMaxEvents);
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

void StepTrace::write(const std::filesystem::path& file) const {
  detail::write_file_atomically(
      file, to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace polyhal
