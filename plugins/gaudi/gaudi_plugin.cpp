// Habana Gaudi device model: Gaudi, Gaudi2 and Gaudi 3 cards in an 8-card
// server. Executes on the host with Gaudi numerics (MME: bf16/f16 inputs,
// f32 accumulation, round-to-nearest-even outputs), enforces HBM capacity
// and estimates speed from published peaks.
#include <fmt/format.h>

#include <algorithm>

#include "../common/collective_cost.hpp"
#include "../common/linear_math_policy.hpp"
#include "../common/modelled_collective_engine.hpp"
#include "../common/op_cost.hpp"
#include "../common/roofline.hpp"
#include "../common/vendor_runtime.hpp"
#include "gaudi_specs.hpp"
#include "polyhal/error.hpp"
#include "polyhal/plugin.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal::gaudi {
namespace {

// Modelling assumptions (not from a datasheet):
constexpr double kAchievableFraction = 0.7;       // of MME peak for large GEMMs
constexpr double kLaunchOverheadSeconds = 10e-6;  // per graph launch
constexpr double kHbmFraction = 0.7;  // of HBM bandwidth for the TPCs' streaming element-wise ops
constexpr double kRuntimeReservedFraction = 0.05;  // HBM kept by the runtime

std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

/// HCCL over the cards' integrated RoCE ports (datasheet counts): inside
/// a server all-to-all over the scale-up ports (reduce-scatter and
/// all-gather, 2 steps); across servers each card's shard is ring-reduced
/// with the same card of every other server over its scale-out ports
/// (Gaudi2: 21 of 24 x 100 GbE inside, 3 out). 70% achievable and 10 us
/// per step assumed.
double hccl_all_reduce_seconds(const GaudiGeneration& g, std::int64_t cards_per_server,
                               double bytes, std::int64_t replicas) {
  const double port = g.roce_port_gbps * 1e9 / 8;
  const plugins::LinkModel scale_up{(g.roce_ports - g.scale_out_ports) * port, 0.7, 10e-6};
  const plugins::LinkModel scale_out{g.scale_out_ports * port, 0.7, 10e-6};
  const std::int64_t in_server = std::min(replicas, cards_per_server);
  double seconds = plugins::all_reduce_seconds(bytes, in_server, scale_up, 2);
  if (replicas > cards_per_server) {
    const std::int64_t servers = (replicas + cards_per_server - 1) / cards_per_server;
    seconds += plugins::all_reduce_seconds(bytes / static_cast<double>(in_server), servers,
                                           scale_out, 2 * (servers - 1));
  }
  return seconds;
}

class GaudiDevice final : public Device {
 public:
  /// Card `index` of `cards` x `servers` (numbered server by server).
  GaudiDevice(int index, const GaudiGeneration& generation, int cards, int servers)
      : Device(make_properties(index, generation, cards, servers)),
        generation_(generation),
        cards_per_server_(cards) {
    // MME and TPC: f32 accumulation, round-to-nearest-even outputs.
    register_reference_kernels(registry(), generation.dtypes, MatMulNumerics{DType::f32, false, 0});
    // bf16 products with f32 accumulation are what the MME does with bf16
    // operands, so bf32 is modelled; int8 is not an MME format.
    plugins::refuse_linear_math(registry(), [](LinearMath math) -> std::string {
      if (math == LinearMath::int8)
        return "Gaudi's MME multiplies f32, tf32, bf16 and f16 (fp8 from Gaudi 2, not modelled), "
               "not int8; use model.precision bf16";
      return {};
    });
  }

  std::optional<double> estimate_seconds(const KernelDesc& desc) const override {
    if (desc.op == OpKind::all_reduce) return all_reduce_seconds(desc);
    if (desc.op == OpKind::host_transfer) {
      // PCIe to the host: 70% achievable and 10 us per transfer assumed.
      const double bytes = static_cast<double>(element_count(desc.input_shapes.at(0))) *
                           static_cast<double>(dtype_size(desc.dtype));
      return plugins::host_transfer_seconds(bytes,
                                            plugins::LinkModel{generation_.host_link, 0.7, 10e-6});
    }
    const auto cost = plugins::op_cost(desc);
    // Matrix work runs on the MME (f16 at the bf16 rate on Gaudi2/3);
    // element-wise ops on the TPCs are modelled as HBM-bound.
    const double peak =
        plugins::compute_dtype(desc) == DType::f32 ? generation_.peak_f32 : generation_.peak_bf16;
    if (cost.matrix && peak <= 0.0) return std::nullopt;  // not published: no estimate
    return plugins::Roofline{cost.matrix ? peak : 1.0, generation_.hbm_bandwidth,
                             kAchievableFraction, kLaunchOverheadSeconds, kHbmFraction}
        .seconds(cost.flops, cost.bytes, cost.vector_bytes);
  }

  double all_reduce_seconds(const KernelDesc& desc) const {
    const double bytes = static_cast<double>(element_count(desc.input_shapes.at(0))) *
                         static_cast<double>(dtype_size(desc.dtype));
    return hccl_all_reduce_seconds(generation_, cards_per_server_, bytes,
                                   desc.attrs_as<AllReduceAttrs>().replicas);
  }

  MemoryReport plan_memory(const std::vector<MemoryItem>& items) const override {
    MemoryReport report = Device::plan_memory(items);
    const auto usable = static_cast<std::uint64_t>(static_cast<double>(generation_.hbm_bytes) *
                                                   (1.0 - kRuntimeReservedFraction));
    report.capacity_bytes = usable;
    report.fits = report.required_bytes <= usable;
    report.notes.clear();
    report.notes.push_back(fmt::format("HBM: {} usable of {} ({}% kept by the runtime, modelled)",
                                       gib(usable), gib(generation_.hbm_bytes),
                                       static_cast<int>(kRuntimeReservedFraction * 100)));
    if (!report.fits) {
      report.notes.push_back(
          "does not fit: reduce the micro-batch and raise gradient accumulation, or use bf16");
    }
    return report;
  }

 protected:
  std::string kernel_advice(const KernelDesc& desc) const override {
    if (desc.dtype == DType::f16 && generation_.name == "gaudi") {
      return "first-generation Gaudi computes in bf16 and f32; use dtype bf16";
    }
    return {};
  }

 private:
  static DeviceProperties make_properties(int index, const GaudiGeneration& g, int cards,
                                          int servers) {
    DeviceProperties p;
    p.name = fmt::format("hpu{}", index);  // Habana's own name for a card (PyTorch's "hpu"), apart
                                           // from the generations gaudi, gaudi2, gaudi3
    p.backend = "gaudi";
    p.vendor = "Habana Labs (Intel)";
    p.product =
        servers == 1
            ? fmt::format("{} model, card {} of {} in {}", g.product, index + 1, cards, g.server)
            : fmt::format("{} model, card {} of {} in {} {} of {}", g.product, index % cards + 1,
                          cards, g.server, index / cards + 1, servers);
    p.mode = DeviceMode::model;
    p.dtypes = g.dtypes;
    p.memory_capacity_bytes = g.hbm_bytes;
    if (g.peak_bf16 > 0) p.peak_flops[DType::bf16] = g.peak_bf16;
    std::string dtypes;
    for (DType t : g.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + std::string(dtype_name(t));
    p.table = {
        {"mode", "model", Provenance::modelled, "device model on the host; no Gaudi attached"},
        {"server", fmt::format("{} ({} cards)", g.server, kCardsPerServer), Provenance::datasheet,
         ""},
        {"memory", fmt::format("{} HBM", gib(g.hbm_bytes)), Provenance::datasheet, ""},
        {"memory bandwidth", fmt::format("{:.2f} TB/s", g.hbm_bandwidth / 1e12),
         Provenance::datasheet, ""},
        {"peak bf16",
         g.peak_bf16 > 0 ? fmt::format("{:.0f} TFLOP/s", g.peak_bf16 / 1e12) : "not published",
         Provenance::datasheet, g.peak_bf16 > 0 ? "MME" : "no estimate is made"},
        {"dtypes", dtypes, Provenance::datasheet, ""},
        {"RoCE",
         fmt::format("{} x {} GbE ({} for scale-out)", g.roce_ports, g.roce_port_gbps,
                     g.scale_out_ports),
         Provenance::datasheet, "integrated; all-to-all inside the server"},
        {"host link", fmt::format("{:.1f} GB/s", g.host_link / 1e9), Provenance::datasheet,
         "PCIe x16; a step's inputs come this way"},
    };
    return p;
  }

  GaudiGeneration generation_;
  std::int64_t cards_per_server_;
};

class GaudiBackend final : public Backend {
 public:
  std::string name() const override { return "gaudi"; }

  std::vector<OptionSpec> device_options() const override {
    using T = OptionSpec::Type;
    return {
        {"mode",
         T::choice,
         {"model", "hardware"},
         "model",
         "model: host execution with Gaudi rules"},
        {"generation", T::choice, {"gaudi", "gaudi2", "gaudi3"}, "gaudi2", "which Gaudi"},
        {"cards", T::integer, {}, "8", "cards in each server to use (1-8)"},
        {"servers",
         T::integer,
         {},
         "1",
         "servers joined over the cards' scale-out RoCE ports (1-64)"},
    };
  }

 protected:
  std::vector<std::unique_ptr<Device>> do_open_devices(const DeviceOptions& options) override {
    if (options.at("mode") == "hardware") {
      plugins::refuse_hardware_mode("Gaudi", "libSynapse.so",
                                    "Habana SynapseAI runtime and habanalabs driver");
    }
    const int cards = std::stoi(options.at("cards"));
    if (cards < 1 || cards > kCardsPerServer) {
      throw ConfigError(fmt::format("key 'device.cards': a server has 1 to {} cards, got {}",
                                    kCardsPerServer, cards));
    }
    const int servers = std::stoi(options.at("servers"));
    if (servers < 1 || servers > kMaxServers) {
      throw ConfigError(
          fmt::format("key 'device.servers': 1 to {} servers, got {}", kMaxServers, servers));
    }
    const auto& generations = gaudi_generations();
    const auto generation =
        *std::find_if(generations.begin(), generations.end(),
                      [&](const auto& g) { return g.name == options.at("generation"); });
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < cards * servers; ++i)
      devices.push_back(std::make_unique<GaudiDevice>(i, generation, cards, servers));
    return devices;
  }

  /// HCCL over the cards' RoCE ports; it reduces every type the cards hold.
  std::unique_ptr<CollectiveEngine> do_make_collective_engine(
      const DeviceOptions& options) override {
    const auto& generations = gaudi_generations();
    const auto generation =
        *std::find_if(generations.begin(), generations.end(),
                      [&](const auto& g) { return g.name == options.at("generation"); });
    const std::int64_t cards = std::stoi(options.at("cards"));
    return std::make_unique<plugins::ModelledCollectiveEngine>(
        "HCCL over RoCE (modelled)",
        [generation, cards](double bytes, std::int64_t replicas) {
          return hccl_all_reduce_seconds(generation, cards, bytes, replicas);
        },
        [](const CollectiveCall&) { return true; });
  }
};

}  // namespace
}  // namespace polyhal::gaudi

POLYHAL_PLUGIN("gaudi", "0.1.0", "Habana Gaudi / Gaudi2 / Gaudi 3 device model (no hardware path)",
               polyhal::gaudi::GaudiBackend)
