// Graphcore IPU device model: GC200 Mk2 IPUs in an IPU-POD. Executes on the
// host with the IPU's rules (f16/f32 only, f16 or f32 partials, optional
// stochastic rounding, per-tile SRAM) and estimates speed from datasheet peaks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../common/collective_cost.hpp"
#include "../common/linear_math_policy.hpp"
#include "../common/modelled_collective_engine.hpp"
#include "../common/op_cost.hpp"
#include "../common/roofline.hpp"
#include "../common/vendor_runtime.hpp"
#include "ipu_specs.hpp"
#include "polyhal/error.hpp"
#include "polyhal/plugin.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal::ipu {
namespace {

// Modelling assumptions (not from a datasheet):
constexpr double kAchievableFraction = 0.6;    // of peak for large matmuls
constexpr double kSyncOverheadSeconds = 5e-6;  // per program step
// Code and vertex state on every tile: calibrated, not a measurement of
// Poplar's code. It is what the calibration point in plan_memory leaves
// above polyhal's own tensor count, which keeps more activations live than
// Poplar's liveness analysis would; the two together are what is calibrated.
// Exchange buffers are not extra: Poplar counts the operand copies a step
// receives by exchange within that step's temporaries (see plan_memory).
constexpr std::uint64_t kCodeBytesPerTile = 3 * 1024;

struct IpuSettings {
  std::string system;
  IpuGeneration generation;
  bool streaming_optimizer_state = false;  // optimizer state in Streaming Memory
  DType partials = DType::f32;
  bool stochastic_rounding = false;
  double available_memory_proportion = 0.6;
  std::uint64_t seed = 0;
};

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

/// GCL's ring all-reduce over IPU-Links (320 GB/s per IPU, datasheet;
/// assumed half each way, 70% achievable, 2 us per ring step) inside a POD
/// of up to 64 IPUs; beyond that the pods' shards are also reduced over
/// the gateways' 2 x 100 Gb/s per 4 IPUs (GW-Links, datasheet).
double gcl_all_reduce_seconds(double bytes, std::int64_t replicas) {
  constexpr std::int64_t kPod = 64;
  const plugins::LinkModel ipu_links{160e9, 0.7, 2e-6};
  const std::int64_t in_pod = std::min(replicas, kPod);
  double seconds = plugins::all_reduce_seconds(bytes, in_pod, ipu_links, 2 * (in_pod - 1));
  if (replicas > kPod) {
    const std::int64_t pods = (replicas + kPod - 1) / kPod;
    const plugins::LinkModel gw_links{2 * 100e9 / 8 / 4, 0.7, 10e-6};
    seconds += plugins::all_reduce_seconds(bytes / static_cast<double>(in_pod), pods, gw_links,
                                           2 * (pods - 1));
  }
  return seconds;
}

class IpuDevice final : public Device {
 public:
  IpuDevice(int index, const PodSystem& system, const IpuSettings& settings)
      : Device(make_properties(index, system, settings)), settings_(settings) {
    // f16 kernels accumulate in the configured partials type; f32 in f32.
    register_reference_kernels(
        registry(), {DType::f16, DType::f32},
        MatMulNumerics{settings.partials, settings.stochastic_rounding, settings.seed});
    plugins::refuse_linear_math(registry(), [](LinearMath math) -> std::string {
      if (math == LinearMath::int8)
        return "the IPU's AMP units multiply f16 and f32 only (no int8); use model.precision f16";
      if (math == LinearMath::bf16_products)
        return "the IPU has no bf16 arithmetic (bf32 needs it); use model.precision f16 or f32";
      return {};
    });
  }

  std::optional<double> estimate_seconds(const KernelDesc& desc) const override {
    if (desc.op == OpKind::all_reduce) return all_reduce_seconds(desc);
    if (desc.op == OpKind::host_transfer) {
      // Host links: 70% achievable and 10 us per transfer assumed.
      return plugins::host_transfer_seconds(desc_bytes(desc),
                                            plugins::LinkModel{kHostLinkBandwidth, 0.7, 10e-6});
    }
    const auto cost = plugins::op_cost(desc);
    double seconds = plugins::Roofline{peak_for(plugins::compute_dtype(desc)),
                                       settings_.generation.memory_bandwidth, kAchievableFraction,
                                       kSyncOverheadSeconds}
                         .seconds(cost.flops, cost.bytes, cost.vector_bytes);
    if (settings_.streaming_optimizer_state && is_update(desc.op)) {
      // m, v and (with compute copies) the f32 master come in from Streaming
      // Memory and go back after the update.
      // m at its storage type, v in f32, the f32 master with compute copies.
      const double m =
          static_cast<double>(dtype_size(desc.attrs_as<OptimizerUpdateAttrs>().first_moment));
      const double per_element = m + 4.0 + (desc.round_to != DType::f32 ? 4.0 : 0.0);
      const double state =
          per_element * static_cast<double>(element_count(desc.input_shapes.at(0)));
      seconds += 2.0 * state / kStreamingBandwidth;
    }
    return seconds;
  }

  static double desc_bytes(const KernelDesc& desc) {
    return static_cast<double>(element_count(desc.input_shapes.at(0))) *
           static_cast<double>(dtype_size(desc.dtype));
  }

  static bool is_update(OpKind op) {
    return op == OpKind::adamw_update || op == OpKind::lamb_update || op == OpKind::sgd_update;
  }

  static double all_reduce_seconds(const KernelDesc& desc) {
    return gcl_all_reduce_seconds(desc_bytes(desc), desc.attrs_as<AllReduceAttrs>().replicas);
  }

  /// Tile memory like Poplar's: every tile holds its share of the code and
  /// vertex state, the always-live tensors, the live activations and the
  /// largest step's temporaries. Poplar's planner lets each matmul use up to
  /// available_memory_proportion of every tile for temporaries (operand
  /// copies received by exchange, partial sums) and a large matmul uses that
  /// budget, so the plan reserves the whole budget (or the program's own
  /// largest scratch when that is more, which then does not fit).
  /// Calibration: Graphcore ran BERT-base seq 128 SQuAD inference on one Mk2
  /// IPU up to micro-batch 80 with available_memory_proportion 0.55 (the
  /// default 0.6 does not fit at 80, and does at 64); this plan fits 64 at
  /// 0.6 and 80 at 0.55, not 88 at 0.55 nor 80 at 0.6
  /// (tests/device_model_test.cpp).
  MemoryReport plan_memory(const std::vector<MemoryItem>& items) const override {
    std::vector<MemoryItem> on_chip, off_chip;
    std::uint64_t streamed = 0, workspace = 0;
    // Under mixed precision the GEMMs read f16 compute copies: the f32
    // master weights then live with the optimizer state (Graphcore's recipe).
    bool compute_copies = false;
    for (const auto& item : items)
      compute_copies = compute_copies || item.category == "weights (compute copy)";
    const auto off = [&](const MemoryItem& item) {
      return settings_.streaming_optimizer_state &&
             (item.category == "optimizer state" ||
              (compute_copies && item.category == "weights" && item.name == "f32"));
    };
    for (const auto& item : items) {
      if (item.category == "workspace") {
        workspace += item.bytes;
      } else if (off(item)) {
        streamed += item.bytes;
        off_chip.push_back({item.category + " (Streaming Memory)", item.name, item.bytes});
      } else {
        on_chip.push_back(item);
      }
    }
    const std::uint64_t code = kCodeBytesPerTile * Gc200Spec::kTiles;
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(Gc200Spec::kMemoryBytes) *
                                                   settings_.available_memory_proportion);
    on_chip.push_back({"code and vertex state", "modelled", code});
    on_chip.push_back({"temporaries", "largest step", std::max(workspace, budget)});
    MemoryReport report = Device::plan_memory(on_chip);
    // Listed, but not counted against tile memory.
    report.items.insert(report.items.end(), off_chip.begin(), off_chip.end());
    const std::uint64_t streaming_capacity = settings_.generation.streaming_memory;
    report.capacity_bytes = Gc200Spec::kMemoryBytes;
    report.fits = report.required_bytes <= report.capacity_bytes && workspace <= budget &&
                  streamed <= streaming_capacity;
    report.notes.clear();
    if (settings_.streaming_optimizer_state) {
      report.notes.push_back(fmt::format(
          "optimizer state and f32 master weights in Streaming Memory: {} of {} per IPU (not in "
          "tile memory; streamed in and out for every update at {:.0f} GB/s, modelled)",
          mib(streamed), mib(streaming_capacity), kStreamingBandwidth / 1e9));
    }
    report.notes.push_back(fmt::format(
        "per tile: {:.1f} KiB of {} KiB over {} tiles: {} KiB code and vertex state (modelled), "
        "temporaries of the largest step within available_memory_proportion {} ({:.1f} KiB)",
        static_cast<double>(report.required_bytes) / Gc200Spec::kTiles / 1024.0,
        Gc200Spec::kTileMemoryBytes / 1024, Gc200Spec::kTiles, kCodeBytesPerTile / 1024,
        settings_.available_memory_proportion,
        static_cast<double>(std::max(workspace, budget)) / Gc200Spec::kTiles / 1024.0));
    if (report.required_bytes > report.capacity_bytes) {
      report.notes.push_back(fmt::format("does not fit: needs {} of {} In-Processor-Memory; {}",
                                         mib(report.required_bytes), mib(report.capacity_bytes),
                                         not_fit_advice(items, report.required_bytes, budget)));
    }
    if (workspace > budget) {
      report.notes.push_back(
          fmt::format("temporaries need {} but available_memory_proportion {} allows {}: raise "
                      "device.available_memory_proportion "
                      "or reduce the micro-batch",
                      mib(workspace), settings_.available_memory_proportion, mib(budget)));
    }
    return report;
  }

 protected:
  /// What would make it fit, from what takes the memory: only advice that
  /// applies (no "use f16" to an f16 plan).
  std::string not_fit_advice(const std::vector<MemoryItem>& items, std::uint64_t required,
                             std::uint64_t temporaries_budget) const {
    std::uint64_t activations = 0, f32_activations = 0, state = 0;
    for (const auto& item : items) {
      if (item.category == "activations") {
        activations += item.bytes;
        if (item.name == "f32") f32_activations += item.bytes;
      }
      if (item.category == "optimizer state") state += item.bytes;
    }
    std::vector<std::string> advice{"reduce the micro-batch"};
    if (temporaries_budget * 4 > required)
      advice.push_back(fmt::format(
          "lower device.available_memory_proportion (now {}; Graphcore's pre-training recipes "
          "use 0.15-0.3) to plan matmuls with fewer temporaries",
          settings_.available_memory_proportion));
    if (f32_activations * 4 > activations && activations > 0)
      advice.push_back("compute in f16 (model.precision: f16 with loss scaling)");
    if (activations * 4 > required)
      advice.push_back("recompute activations (model.recompute: all)");
    if (state > 0 && !settings_.streaming_optimizer_state)
      advice.push_back(
          "keep the optimizer state in Streaming Memory "
          "(device.optimizer_state: streaming) and shard it over replicas "
          "(optimizer.shard_state: true)");
    advice.push_back("or split the model over more IPUs (model.pipeline: more stages)");
    return fmt::format("{}", fmt::join(advice, ", "));
  }

  std::string kernel_advice(const KernelDesc& desc) const override {
    if (desc.dtype == DType::bf16) {
      return "The IPU computes in f16 and f32 only; use dtype f16 (with loss scaling for training)";
    }
    return {};
  }

 private:
  double peak_for(DType type) const {
    const auto& g = settings_.generation;
    if (type == DType::f32) return g.peak_f32;
    // FP16.16 is the datasheet peak; with f32 partials the AMP units run at
    // half rate (modelling assumption, as on Mk1).
    return settings_.partials == DType::f16 ? g.peak_f16 : g.peak_f16 / 2;
  }

  static DeviceProperties make_properties(int index, const PodSystem& system,
                                          const IpuSettings& s) {
    DeviceProperties p;
    p.name = fmt::format("ipu{}", index);
    p.backend = "ipu";
    p.vendor = "Graphcore";
    const auto& g = s.generation;
    p.product = fmt::format("{} (IPU-{} model, {} of {})", g.product, system.name, index + 1,
                            system.ipus());
    p.mode = DeviceMode::model;
    p.dtypes = {DType::f16, DType::f32};
    p.memory_capacity_bytes = Gc200Spec::kMemoryBytes;
    p.peak_flops = {{DType::f16, g.peak_f16}, {DType::f32, g.peak_f32}};
    p.table = {
        {"mode", "model", Provenance::modelled, "device model on the host; no IPU attached"},
        {"system",
         fmt::format("IPU-{} ({} x {}, {} IPUs)", system.name, system.machines, g.machine,
                     system.ipus()),
         Provenance::datasheet, "IPU-POD datasheet"},
        {"tiles", std::to_string(Gc200Spec::kTiles), Provenance::datasheet, "GC200"},
        {"memory",
         fmt::format("{} ({} KiB x {} tiles)", mib(Gc200Spec::kMemoryBytes),
                     Gc200Spec::kTileMemoryBytes / 1024, Gc200Spec::kTiles),
         Provenance::datasheet, "In-Processor-Memory, SRAM"},
        {"memory bandwidth", fmt::format("{:.1f} TB/s", g.memory_bandwidth / 1e12),
         Provenance::datasheet, "In-Processor-Memory"},
        {"peak f16", fmt::format("{:.0f} TFLOP/s", g.peak_f16 / 1e12), Provenance::datasheet,
         "FP16.16 per IPU"},
        {"peak f16 (f32 partials)", fmt::format("{:.0f} TFLOP/s", g.peak_f16 / 2e12),
         Provenance::modelled, "assumed half rate"},
        {"peak f32", fmt::format("{:.1f} TFLOP/s", g.peak_f32 / 1e12), Provenance::datasheet,
         "per IPU"},
        {"Streaming Memory",
         fmt::format("up to {:.0f} GB per IPU", static_cast<double>(g.streaming_memory) / 1e9),
         Provenance::datasheet, fmt::format("{} DDR shared by its 4 IPUs", g.machine)},
        {"optimizer state", s.streaming_optimizer_state ? "Streaming Memory" : "tile memory",
         Provenance::modelled, "device.optimizer_state"},
        {"dtypes", "f16, f32", Provenance::datasheet, "no bf16 on the IPU"},
        {"partials", std::string(dtype_name(s.partials)), Provenance::modelled,
         "matmul accumulation type"},
        {"stochastic rounding", s.stochastic_rounding ? "on" : "off", Provenance::modelled,
         "f16 outputs"},
        {"available memory proportion", fmt::format("{}", s.available_memory_proportion),
         Provenance::modelled, "cap on temporaries per tile"},
        {"IPU-Links", "320 GB/s", Provenance::datasheet, "chip-to-chip per IPU"},
        {"host links", fmt::format("{:.2f} GB/s per IPU", kHostLinkBandwidth / 1e9),
         Provenance::datasheet, fmt::format("{}'s 2 x 100 Gb/s over its 4 IPUs", g.machine)},
    };
    return p;
  }

  IpuSettings settings_;
};

class IpuBackend final : public Backend {
 public:
  std::string name() const override { return "ipu"; }

  std::vector<OptionSpec> device_options() const override {
    std::vector<std::string> systems;
    for (const auto& s : pod_systems()) systems.push_back(s.name);
    using T = OptionSpec::Type;
    return {
        {"mode", T::choice, {"model", "hardware"}, "model", "model: host execution with IPU rules"},
        {"system", T::choice, systems, "POD4", "IPU-POD size: number of IPUs"},
        {"generation", T::choice, {"mk2", "bow"}, "mk2", "GC200 Mk2 (IPU-M2000) or Bow (Bow-2000)"},
        {"optimizer_state",
         T::choice,
         {"tile", "streaming"},
         "tile",
         "where optimizer state lives: tile memory, or off-chip Streaming Memory"},
        {"ipus_per_replica",
         T::string,
         {},
         "auto",
         "IPUs per replica, one pipeline stage each (auto: as many as model.pipeline has stages)"},
        {"partials", T::choice, {"f32", "f16"}, "f32", "matmul accumulation type for f16 inputs"},
        {"stochastic_rounding", T::boolean, {}, "false", "stochastic rounding of f16 results"},
        {"available_memory_proportion",
         T::number,
         {},
         "0.6",
         "share of tile memory for temporaries"},
        {"seed", T::integer, {}, "0", "seed for stochastic rounding"},
    };
  }

 protected:
  std::vector<std::unique_ptr<Device>> do_open_devices(const DeviceOptions& options) override {
    if (options.at("mode") == "hardware") {
      plugins::refuse_hardware_mode("IPU", "libpoplar.so",
                                    "Graphcore Poplar SDK runtime and an attached IPU-POD");
    }
    IpuSettings settings;
    settings.system = options.at("system");
    for (const auto& g : ipu_generations())
      if (g.name == options.at("generation")) settings.generation = g;
    settings.streaming_optimizer_state = options.at("optimizer_state") == "streaming";
    settings.partials = options.at("partials") == "f16" ? DType::f16 : DType::f32;
    settings.stochastic_rounding = options.at("stochastic_rounding") == "true";
    settings.available_memory_proportion = std::stod(options.at("available_memory_proportion"));
    if (settings.available_memory_proportion <= 0.0 || settings.available_memory_proportion > 1.0) {
      throw ConfigError(fmt::format(
          "key 'device.available_memory_proportion': expected a value in (0, 1], got {}",
          settings.available_memory_proportion));
    }
    settings.seed = std::stoull(options.at("seed"));
    const auto& systems = pod_systems();
    const auto system = *std::find_if(systems.begin(), systems.end(),
                                      [&](const auto& s) { return s.name == settings.system; });
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < system.ipus(); ++i)
      devices.push_back(std::make_unique<IpuDevice>(i, system, settings));
    return devices;
  }

  /// GCL over IPU-Links and GW-Links: reductions in f16 and f32, the IPU's
  /// types; anything else is the host's business.
  std::unique_ptr<CollectiveEngine> do_make_collective_engine(const DeviceOptions&) override {
    return std::make_unique<plugins::ModelledCollectiveEngine>(
        "GCL over IPU-Links (modelled)", &gcl_all_reduce_seconds, [](const CollectiveCall& call) {
          const bool reduces =
              call.op == CollectiveOp::all_reduce || call.op == CollectiveOp::reduce_scatter;
          return !reduces || call.type == DType::f16 || call.type == DType::f32;
        });
  }
};

}  // namespace
}  // namespace polyhal::ipu

POLYHAL_PLUGIN("ipu", "0.1.0", "Graphcore GC200 IPU / IPU-POD device model (no hardware path)",
               polyhal::ipu::IpuBackend)
