// Where a run's replicas and pipeline stages go, and how they talk: batch
// shape, IPUs per replica, replicas against the devices and CPUs there are,
// overlap and the backend's collective engine.
#include <fmt/format.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "plan/placement_plan.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Local replicas a host always allows (tests and numerics checks run a few
/// on a small machine), whatever its CPU count.
constexpr std::int64_t kMinLocalReplicas = 8;

/// `device.ipus_per_replica` (IPU): a replica's pipeline stages go one per
/// IPU, as Graphcore's --ipus-per-replica. `auto` takes model.pipeline's
/// stage count; a number without model.pipeline balances that many stages;
/// a number that disagrees with model.pipeline is an error naming both keys.
/// Returns the stages to balance evenly (0: none, or model.pipeline's list).
std::int64_t balanced_stages(const RunConfig& config, const DeviceOptions& options) {
  const ModelSection& m = config.model;
  const auto it = options.find("ipus_per_replica");
  if (it == options.end() || it->second == "auto") return m.pipeline_stages;
  std::int64_t ipus = 0;
  const auto [end, ec] =
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), ipus);
  if (ec != std::errc{} || end != it->second.data() + it->second.size() || ipus < 1 ||
      ipus > 1024) {
    throw config.error(
        "device.ipus_per_replica",
        fmt::format("expected auto or a whole number in [1, 1024], got '{}'", it->second));
  }
  const auto listed = static_cast<std::int64_t>(m.pipeline.size());
  if (listed == 0 && m.pipeline_stages == 0) return ipus > 1 ? ipus : 0;
  const std::int64_t given = listed > 0 ? listed : m.pipeline_stages;
  if (given != ipus) {
    throw config.error(
        "device.ipus_per_replica",
        fmt::format("{} IPUs per replica, but model.pipeline ({}) has {} stage{}: each stage runs "
                    "on its own IPU; give {} stages or set ipus_per_replica to {}",
                    ipus, config.locate("model.pipeline"), given, given == 1 ? "" : "s", ipus,
                    given));
  }
  return m.pipeline_stages;
}

/// collective.overlap: auto overlaps only where MPI ranks span hosts. Over
/// a network the transfer is the link's time, which backward can hide;
/// between ranks of one host it is copies on the cores backward needs
/// (bench/overlap_allreduce.py). Every rank decides alike.
void resolve_overlap(const RunConfig& config, const WorldShape& world, PlacementPlan& plan) {
  const TriState overlap = config.collective.overlap;
  plan.estimate_overlaps = overlap != TriState::no;
  plan.overlap_all_reduce = overlap == TriState::yes;
  if (overlap != TriState::automatic || !world.mpi) return;
  const bool spans_hosts = world.ranks_on_this_host < world.ranks;
  plan.overlap_all_reduce = spans_hosts;
  plan.overlap_reason =
      fmt::format("collective.overlap auto: gradients all-reduced {} ({})",
                  spans_hosts ? "during backward" : "after backward",
                  spans_hosts ? "the ranks span several hosts" : "every rank is on this host");
}

/// The replicas fit what is there: a modelled system's devices (one per
/// stage of each replica), this host's CPUs for local replicas.
void check_replicas_fit(const RunConfig& config, const std::vector<Device*>& devices,
                        const PlacementPlan& plan) {
  const auto& p = devices.front()->properties();
  const std::int64_t replicas = plan.replicas;
  const std::int64_t stages = plan.stages_per_replica;
  if (p.mode == DeviceMode::model &&
      replicas * stages > static_cast<std::int64_t>(devices.size())) {
    throw config.error("batch.replicas",
                       fmt::format("{} replicas x {} pipeline stage{} need {} devices, but the "
                                   "modelled {} has {} ({}): use fewer replicas or a larger system",
                                   replicas, stages, stages == 1 ? "" : "s", replicas * stages,
                                   p.backend, devices.size(), p.product));
  }
  if (p.mode != DeviceMode::model && config.collective.engine == "local") {
    // Local replicas are threads on this host, each with its own copy of
    // the model: beyond the CPUs there are, they only wait for each other.
    const std::int64_t cpus = available_cpus();
    const std::int64_t most = std::max<std::int64_t>(kMinLocalReplicas, cpus);
    if (replicas > most)
      throw config.error("batch.replicas",
                         fmt::format("{} local replicas on {} CPUs: at most {} (one thread each, "
                                     "each with its own model); run more as MPI ranks (collective: "
                                     "mpi, docs/scale-out.md)",
                                     replicas, cpus, most));
  }
}

}  // namespace

std::int64_t available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max<std::int64_t>(1, ::sysconf(_SC_NPROCESSORS_ONLN));
}

PlacementPlan resolve_placement(const RunConfig& config, const std::vector<Device*>& devices,
                                const DeviceOptions& device_options, const WorldShape& world) {
  PlacementPlan plan;
  plan.micro = config.batch.micro;
  plan.grad_accum = config.batch.grad_accum;
  if (world.mpi && config.batch.replicas != 1 && config.batch.replicas != world.ranks) {
    throw config.error("batch.replicas",
                       fmt::format("{} replicas, but mpirun started {} ranks (one replica each); "
                                   "set it to {} or leave it at 1",
                                   config.batch.replicas, world.ranks, world.ranks));
  }
  plan.replicas = world.mpi ? world.ranks : static_cast<int>(config.batch.replicas);
  plan.balanced_stages = balanced_stages(config, device_options);
  plan.stages_per_replica =
      plan.balanced_stages > 0
          ? plan.balanced_stages
          : std::max<std::int64_t>(1, static_cast<std::int64_t>(config.model.pipeline.size()));
  resolve_overlap(config, world, plan);
  check_replicas_fit(config, devices, plan);
  const auto& engine = devices.front()->collective_engine();
  if (config.collective.plugin_engine == "required" && !engine)
    throw config.error(
        "collective.plugin_engine",
        fmt::format("required, but backend '{}' has no collective "
                    "engine of its own; set it to auto or off to run the collectives on polyhal's "
                    "{} engine",
                    devices.front()->properties().backend, config.collective.engine));
  plan.plugin_collectives = config.collective.plugin_engine != "off";
  return plan;
}

}  // namespace polyhal
