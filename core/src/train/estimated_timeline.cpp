#include "train/estimated_timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace polyhal {

namespace {

constexpr double kMicroseconds = 1e6;

/// A forward or backward pass at `start_us`: one slice, holding its kernels
/// when given. Returns its end.
double pass(TraceTrack& track, const char* name, double start_us, double seconds,
            const std::vector<EstimatedSlice>* kernels) {
  double end = start_us + seconds * kMicroseconds;
  if (kernels) {
    // The pass ends where its last kernel does: the children stay inside.
    end = start_us;
    for (const auto& k : *kernels) {
      track.slice_at(k.name, "kernel", end, k.seconds * kMicroseconds, k.args);
      end += k.seconds * kMicroseconds;
    }
  }
  track.slice_at(name, "phase", start_us, end - start_us);
  return end;
}

/// The gradient all-reduce (with replicas) and the optimizer after `at`;
/// returns the end.
double after_backward(TraceTrack& track, Device& device, std::int64_t parameters,
                      const StepWork& work, double optimizer_seconds, double at) {
  if (const auto all_reduce = estimate_gradient_all_reduce(device, parameters, work.replicas)) {
    track.slice_at("all-reduce gradients", "collective", at, *all_reduce * kMicroseconds,
                   {{"replicas", work.replicas}, {"f32_values", parameters}});
    at += *all_reduce * kMicroseconds;
  }
  track.slice_at("optimizer", "host", at, optimizer_seconds * kMicroseconds);
  return at + optimizer_seconds * kMicroseconds;
}

}  // namespace

std::optional<double> trace_estimated_whole_step(TraceLane& lane, const BertTraining& model,
                                                 Device& device, const StepWork& work,
                                                 std::int64_t step, double start_us) {
  const auto estimate = model.estimate_work();
  const auto forward = model.estimated_kernels(false), backward = model.estimated_kernels(true);
  if (!estimate || !forward || !backward) return std::nullopt;
  TraceTrack& track = lane.track(fmt::format("replica {}", lane.replica()));
  double t = start_us, last_backward = start_us;
  for (int micro = 0; micro < work.accumulation; ++micro) {
    const bool detailed = micro < kTracedKernelMicroBatches;
    const double begin = t;
    track.slice_at("host I/O", "host", t, estimate->host_io * kMicroseconds);
    t += estimate->host_io * kMicroseconds;
    t = pass(track, "forward", t, estimate->forward, detailed ? &*forward : nullptr);
    last_backward = t;
    t = pass(track, "backward", t, estimate->backward, detailed ? &*backward : nullptr);
    track.slice_at(fmt::format("micro-batch {}", micro), "pipeline", begin, t - begin,
                   {{"micro_batch", micro}});
  }
  const auto all_reduce =
      estimate_gradient_all_reduce(device, model.parameter_count(), work.replicas);
  if (all_reduce && work.overlap_bucket_bytes > 0) {
    // As the estimate has it (training_model.cpp): the buckets reduce on
    // their own track while the last backward runs; the step waits for
    // the rest, at least the last bucket.
    const double gradient_bytes = 4.0 * static_cast<double>(model.parameter_count());
    const double last_bucket =
        std::min(1.0, static_cast<double>(work.overlap_bucket_bytes) / gradient_bytes);
    const double exposed =
        std::max(*all_reduce - (t - last_backward) / kMicroseconds, *all_reduce * last_bucket);
    const double done = t + exposed * kMicroseconds;
    lane.track(fmt::format("replica {} communication", lane.replica()))
        .slice_at("all-reduce gradients (overlapped)", "collective",
                  done - *all_reduce * kMicroseconds, *all_reduce * kMicroseconds,
                  {{"replicas", work.replicas}, {"f32_values", model.parameter_count()}});
    track.slice_at("waiting for the all-reduce", "collective", t, done - t);
    track.slice_at("optimizer", "host", done, estimate->optimizer * kMicroseconds);
    t = done + estimate->optimizer * kMicroseconds;
  } else {
    t = after_backward(track, device, model.parameter_count(), work, estimate->optimizer, t);
  }
  track.slice_at(fmt::format("step {}", step), "step", start_us, t - start_us);
  return t;
}

std::optional<double> trace_estimated_pipeline_step(TraceLane& lane, const PipelinedTraining& model,
                                                    Device& device, const StepWork& work,
                                                    std::int64_t step, double start_us) {
  const int stages = model.stage_count();
  const int micro_batches = work.accumulation;
  std::vector<TrainingWorkEstimate> estimates;
  std::vector<std::vector<EstimatedSlice>> forward, backward;
  std::vector<TraceTrack*> tracks;
  for (int s = 0; s < stages; ++s) {
    const auto e = model.stage(s).estimate_work();
    auto f = model.stage(s).estimated_kernels(false), b = model.stage(s).estimated_kernels(true);
    if (!e || !f || !b) return std::nullopt;
    estimates.push_back(*e);
    forward.push_back(std::move(*f));
    backward.push_back(std::move(*b));
    tracks.push_back(&lane.track(fmt::format("replica {} stage {}", lane.replica(), s)));
  }
  // When each stage is free, and when each pass of each micro-batch ends.
  const auto at = [micro_batches](int s, int m) {
    return static_cast<std::size_t>(s) * static_cast<std::size_t>(micro_batches) +
           static_cast<std::size_t>(m);
  };
  std::vector<double> free(static_cast<std::size_t>(stages), start_us);
  std::vector<double> forward_end(at(stages, 0), 0.0), backward_end(at(stages, 0), 0.0);
  // The schedule's order respects every dependency, so each pass starts
  // when its stage is free and its inputs have arrived.
  for (const PipelineAction& a : one_forward_one_backward(stages, micro_batches)) {
    const auto s = static_cast<std::size_t>(a.stage);
    const double ready =
        a.forward ? (a.stage > 0 ? forward_end[at(a.stage - 1, a.micro_batch)] : start_us)
                  : std::max(forward_end[at(a.stage, a.micro_batch)],
                             a.stage < stages - 1 ? backward_end[at(a.stage + 1, a.micro_batch)]
                                                  : start_us);
    const double begin = std::max(free[s], ready);
    TraceTrack& track = *tracks[s];
    const bool detailed = a.micro_batch < kTracedKernelMicroBatches;
    double t = begin;
    if (a.forward && (a.stage == 0 || a.stage == stages - 1)) {
      // The first stage takes the ids, the last the labels, from the host.
      track.slice_at("host I/O", "host", t, estimates[s].host_io * kMicroseconds);
      t += estimates[s].host_io * kMicroseconds;
    }
    t = a.forward
            ? pass(track, "forward", t, estimates[s].forward, detailed ? &forward[s] : nullptr)
            : pass(track, "backward", t, estimates[s].backward, detailed ? &backward[s] : nullptr);
    track.slice_at(fmt::format("{}{}", a.forward ? 'F' : 'B', a.micro_batch), "pipeline", begin,
                   t - begin, {{"micro_batch", a.micro_batch}, {"stage", a.stage}});
    (a.forward ? forward_end : backward_end)[at(a.stage, a.micro_batch)] = t;
    free[s] = t;
  }
  // Each stage all-reduces its own gradients and updates its own weights,
  // all stages at once; the step ends with the last of them.
  double end = start_us;
  for (int s = 0; s < stages; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const double t = after_backward(*tracks[i], device, model.stage_parameters(s), work,
                                    estimates[i].optimizer, free[i]);
    tracks[i]->slice_at(fmt::format("step {}", step), "step", start_us, t - start_us);
    end = std::max(end, t);
  }
  return end;
}

}  // namespace polyhal
