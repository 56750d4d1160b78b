// x86-64 CPU backend: oneDNN for the math, at the highest ISA tier the CPU
// has (cpu_isa.hpp: AVX2 up to AMX), the real host's memory and cores.
#include <fmt/format.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "cpu_isa.hpp"
#include "cpu_threads.hpp"
#include "omp_convert.hpp"
#include "omp_dropout.hpp"
#include "omp_norm_train.hpp"
#include "omp_optimizer.hpp"
#include "omp_thread_count.hpp"
#include "onednn_api.hpp"
#include "onednn_matmul.hpp"
#include "packed_weights.hpp"
#include "polyhal/error.hpp"
#include "polyhal/plugin.hpp"
#include "polyhal/reference_kernels.hpp"
#include "polyhal/train_kernels.hpp"
#include "thread_scratch.hpp"

namespace polyhal::cpu {

namespace {

/// This process's resident size now (/proc/self/statm), or 0 if unknown.
std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// oneDNN 2.6 stops at avx512_core_amx and knows neither avx2_vnni_2 nor
// avx512_core_fp16: those rungs map to the highest tier below them it has
// (onednn::newer_tier).
dnnl::cpu_isa onednn_isa(Isa isa) {
  switch (isa) {
    case Isa::avx512_core_amx_fp16:
      return onednn::newer_tier(onednn::NewerTier::avx512_core_amx_fp16);
    case Isa::avx512_core_fp16:
      return onednn::newer_tier(onednn::NewerTier::avx512_core_fp16);
    case Isa::avx2_vnni_2:
      return onednn::newer_tier(onednn::NewerTier::avx2_vnni_2);
    case Isa::avx512_core_amx:
      return dnnl::cpu_isa::avx512_core_amx;
    case Isa::avx512_core_bf16:
      return dnnl::cpu_isa::avx512_core_bf16;
    case Isa::avx512_core_vnni:
      return dnnl::cpu_isa::avx512_core_vnni;
    case Isa::avx512_core:
      return dnnl::cpu_isa::avx512_core;
    case Isa::avx2_vnni:
      return dnnl::cpu_isa::avx2_vnni;
    case Isa::avx2:
      return dnnl::cpu_isa::avx2;
    case Isa::reference:
      return dnnl::cpu_isa::sse41;
  }
  return dnnl::cpu_isa::sse41;  // not reached: the switch names every rung
}

std::string onednn_isa_name(dnnl::cpu_isa isa) {
  // From the bottom: where this oneDNN maps two rungs to one tier, the
  // lower rung is the tier's own name.
  const auto& ladder = isa_ladder();
  for (auto rung = ladder.rbegin(); rung != ladder.rend(); ++rung)
    if (*rung != Isa::reference && onednn_isa(*rung) == isa) return isa_name(*rung);
  switch (isa) {
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    default:
      return fmt::format("isa 0x{:x}", static_cast<unsigned>(isa));
  }
}

/// Applies the ISA cap to oneDNN (process-wide, settable once) and returns
/// the ISA oneDNN will actually use.
dnnl::cpu_isa apply_isa_cap(Isa isa) {
  const auto status = dnnl::set_max_cpu_isa(onednn_isa(isa));
  const auto effective = dnnl::get_effective_cpu_isa();
  if (status != dnnl::status::success &&
      static_cast<unsigned>(effective) > static_cast<unsigned>(onednn_isa(isa))) {
    throw DeviceUnavailableError(
        fmt::format("device.isa {}: oneDNN's ISA cap is process-wide and already fixed at {} (by "
                    "an earlier device or "
                    "ONEDNN_MAX_CPU_ISA)",
                    isa_name(isa), onednn_isa_name(effective)));
  }
  return effective;
}

std::string cpuinfo_field(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(field)) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::uint64_t host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

/// FLOP per cycle per core for the ISA, assuming two 512-bit (or 256-bit for
/// AVX2) FMA units as on Xeon Gold/Platinum; bf16 counts where it is native.
double flops_per_cycle(Isa isa, DType type) {
  if (isa <= Isa::avx512_core_amx) return type == DType::f32 ? 64.0 : 1024.0;
  if (isa <= Isa::avx512_core_bf16) return type == DType::f32 ? 64.0 : 128.0;
  if (isa_has_avx512(isa)) return 64.0;
  if (isa != Isa::reference) return 32.0;
  return 8.0;
}

class CpuDevice final : public Device {
 public:
  CpuDevice(const CpuFeatures& features, const IsaChoice& choice, dnnl::cpu_isa effective,
            const ThreadChoice& threads)
      : Device(make_properties(features, choice, effective, threads)),
        engine_(dnnl::engine::kind::cpu, 0),
        int8_(int8_support(features, choice.isa)),
        avx512_(isa_has_avx512(choice.isa)),
        avx2_(choice.isa != Isa::reference),
        opened_rss_(resident_bytes()) {
    // Portable kernels first, then oneDNN replaces the hot ones.
    const std::vector<DType> types = properties().dtypes;
    register_reference_kernels(registry(), types, MatMulNumerics{}, omp_parallel_for());
    for (DType type : types) {
      registry().add(OpKind::matmul, type, [this](const KernelDesc& desc, Device&) {
        return make_onednn_matmul(desc, engine_);
      });
      registry().add(OpKind::linear, type, [this](const KernelDesc& desc, Device&) {
        if (desc.attrs_as<LinearAttrs>().math != LinearMath::int8)
          return make_onednn_linear(desc, avx512_, engine_, packed_weights_);
        if (!int8_.runs)
          throw KernelNotFoundError(
              fmt::format("{}: the CPU plugin runs int8 on oneDNN's SIMD kernels (AVX2 and up), "
                          "never by emulation: {}",
                          desc.to_string(), int8_.reason));
        return make_onednn_int8_linear(desc, avx512_, int8_.weight_max, engine_, packed_weights_,
                                       run_scratch_);
      });
      registry().add(OpKind::layernorm, type, [this](const KernelDesc& desc, Device&) {
        return make_onednn_layernorm(desc, engine_);
      });
      registry().add(OpKind::embedding, type,
                     [](const KernelDesc& desc, Device&) { return make_omp_embedding(desc); });
    }
    // Training GEMMs and attention (f32 tensors; bf16 mixed precision via round_to).
    registry().add(OpKind::dense, DType::f32, [this](const KernelDesc& desc, Device&) {
      return make_onednn_dense(desc, engine_);
    });
    registry().add(OpKind::dense_backward, DType::f32, [this](const KernelDesc& desc, Device&) {
      return make_onednn_dense_backward(desc, engine_);
    });
    // The convolution keeps the reference kernel for packed rows.
    const KernelFactory reference_conv = *registry().find(OpKind::sequence_conv, DType::f32);
    const KernelFactory reference_conv_backward =
        *registry().find(OpKind::sequence_conv_backward, DType::f32);
    registry().add(OpKind::sequence_conv, DType::f32,
                   [this, reference_conv](const KernelDesc& desc, Device& device) {
                     return make_onednn_sequence_conv(desc, engine_, reference_conv(desc, device));
                   });
    registry().add(OpKind::sequence_conv_backward, DType::f32,
                   [this, reference_conv_backward](const KernelDesc& desc, Device& device) {
                     return make_onednn_sequence_conv_backward(
                         desc, engine_, reference_conv_backward(desc, device));
                   });
    registry().add(OpKind::grouped_dense, DType::f32, [this](const KernelDesc& desc, Device&) {
      return make_onednn_grouped_dense(desc, engine_);
    });
    registry().add(OpKind::grouped_dense_backward, DType::f32,
                   [this](const KernelDesc& desc, Device&) {
                     return make_onednn_grouped_dense_backward(desc, engine_);
                   });
    // Every CPU training kernel reads and writes bf16 storage itself
    // (operand_types); the rest come from the reference kernels.
    register_attention_kernels(types);
    registry().add(OpKind::layernorm_train, DType::f32,
                   [](const KernelDesc& desc, Device&) { return make_omp_layernorm_train(desc); });
    registry().add(OpKind::layernorm_backward, DType::f32, [](const KernelDesc& desc, Device&) {
      return make_omp_layernorm_backward(desc);
    });
    registry().add(OpKind::pretraining_loss, DType::f32,
                   [](const KernelDesc& desc, Device&) { return make_omp_pretraining_loss(desc); });
    registry().add(OpKind::cast, DType::f32,
                   [](const KernelDesc& desc, Device&) { return make_omp_cast(desc); });
    if (avx512_) {
      for (OpKind op : {OpKind::lamb_update, OpKind::adamw_update}) {
        registry().add(op, DType::f32,
                       [](const KernelDesc& desc, Device&) -> std::unique_ptr<Kernel> {
                         // An f16 first moment is widened and narrowed around
                         // the f32 kernel, as the reference does.
                         if (desc.attrs_as<OptimizerUpdateAttrs>().first_moment != DType::f32)
                           return with_stored_precision(make_omp_adam_update(desc), desc,
                                                        omp_parallel_for(), {});
                         return make_omp_adam_update(desc);
                       });
      }
      registry().add(OpKind::sum_of_squares, DType::f32,
                     [](const KernelDesc& desc, Device&) { return make_omp_sum_of_squares(desc); });
    }
    registry().add(OpKind::embedding_backward, DType::f32, [](const KernelDesc& desc, Device&) {
      return make_omp_embedding_backward(desc);
    });
    registry().add(OpKind::add, DType::f32,
                   [](const KernelDesc& desc, Device&) { return make_omp_add(desc); });
    for (OpKind op : {OpKind::dropout, OpKind::dropout_backward}) {
      registry().add(op, DType::f32, [this](const KernelDesc& desc, Device&) {
        return make_omp_dropout(desc, avx512_);
      });
    }
    for (OpKind op : {OpKind::gelu, OpKind::gelu_backward, OpKind::swish, OpKind::swish_backward}) {
      registry().add(op, DType::f32, [this](const KernelDesc& desc, Device&) {
        return make_onednn_eltwise_train(desc, engine_);
      });
    }
    for (OpKind op : {OpKind::glu, OpKind::glu_backward}) {
      registry().add(op, DType::f32, [this](const KernelDesc& desc, Device&) {
        return make_onednn_glu(desc, engine_);
      });
    }
    if (!avx512_) refuse_bf16_inside_f32_ops();
    compute_with_device_threads(threads.threads);
  }

 private:
  /// oneDNN's attention: inference (every dtype; a sliding window and
  /// MPNet's relative bias as a full additive mask) and training, where a
  /// window keeps the reference kernels.
  void register_attention_kernels(const std::vector<DType>& types) {
    for (DType type : types)
      for (const OpKind op : {OpKind::attention, OpKind::relative_attention})
        registry().add(op, type, [this](const KernelDesc& desc, Device&) {
          return make_onednn_attention(desc, engine_, avx2_);
        });
    const auto unless_windowed = [this](OpKind op, auto make) {
      const KernelFactory reference = *registry().find(op, DType::f32);
      registry().add(op, DType::f32, [reference, make](const KernelDesc& desc, Device& device) {
        if (desc.attrs_as<AttentionAttrs>().window > 0) return reference(desc, device);
        return make(desc);
      });
    };
    unless_windowed(OpKind::attention_train, [this](const KernelDesc& d) {
      return make_onednn_attention_train(d, avx512_, engine_);
    });
    unless_windowed(OpKind::attention_backward, [this](const KernelDesc& d) {
      return make_onednn_attention_backward(d, avx512_, engine_);
    });
  }

 protected:
  /// The items plus what the process already holds (code, libraries, the
  /// runtime's own memory), measured as its resident size when the device
  /// opened: a plan of the host's memory is compared with the host's RSS.
  MemoryReport plan_memory(const std::vector<MemoryItem>& items) const override {
    std::vector<MemoryItem> all = items;
    all.push_back({"process", "code and libraries (resident when opened, measured)", opened_rss_});
    return Device::plan_memory(all);
  }

  /// Every kernel prepared, given its constants and run with the device's
  /// thread count, from whichever thread (omp_thread_count.hpp).
  void compute_with_device_threads(int threads) {
    for (OpKind op : registry().ops()) {
      for (DType type : registry().dtypes_for(op)) {
        KernelFactory inner = *registry().find(op, type);
        registry().add(op, type, [inner, threads](const KernelDesc& desc, Device& device) {
          use_thread_count(threads);
          return with_thread_count(inner(desc, device), threads);
        });
      }
    }
  }

  /// Below AVX-512 oneDNN has no bf16 at all: an f32 op asked to store its
  /// outputs in bf16 (round_to) or to multiply in bf16 (bf32) is refused by
  /// name as a bf16 op is, not left to fail inside oneDNN.
  void refuse_bf16_inside_f32_ops() {
    for (OpKind op : registry().ops()) {
      const KernelFactory* factory = registry().find(op, DType::f32);
      if (factory == nullptr) continue;
      registry().add(op, DType::f32, [inner = *factory](const KernelDesc& desc, Device& device) {
        const auto* linear = std::get_if<LinearAttrs>(&desc.attrs);
        if (desc.round_to == DType::bf16 || desc.products == DType::bf16 ||
            (linear != nullptr && linear->math == LinearMath::bf16_products))
          throw KernelNotFoundError(
              fmt::format("{}{}: bf16 storage and bf16 products need AVX-512 (this CPU or "
                          "device.isa stops below it); use f32",
                          desc.to_string(), desc.round_to == DType::bf16 ? " (bf16 storage)" : ""));
        return inner(desc, device);
      });
    }
  }

  std::string kernel_advice(const KernelDesc& desc) const override {
    if (desc.dtype == DType::bf16) return "bf16 needs AVX-512; lift the device.isa cap or use f32";
    if (desc.dtype == DType::f16) return "use bf16 on the CPU";
    return {};
  }

 private:
  static DeviceProperties make_properties(const CpuFeatures& features, const IsaChoice& choice,
                                          dnnl::cpu_isa effective, const ThreadChoice& threads) {
    DeviceProperties p;
    p.name = "cpu0";
    p.backend = "cpu";
    p.vendor = cpuinfo_field("vendor_id");
    p.product = cpuinfo_field("model name");
    p.mode = DeviceMode::hardware;
    p.dtypes = {DType::f32};
    if (isa_has_avx512(choice.isa)) p.dtypes.push_back(DType::bf16);
    p.memory_capacity_bytes = host_memory_bytes();
    const double mhz = std::atof(cpuinfo_field("cpu MHz").c_str());
    const auto cores = static_cast<double>(threads.threads);
    for (DType t : p.dtypes) p.peak_flops[t] = cores * mhz * 1e6 * flops_per_cycle(choice.isa, t);
    p.table = {
        {"mode", "hardware", Provenance::measured, "runs on this CPU"},
        {"cpu", p.product, Provenance::measured, "/proc/cpuinfo"},
        {"threads", std::to_string(threads.threads), Provenance::measured,
         fmt::format("OpenMP threads oneDNN uses: {}", threads.reason)},
        {"isa", isa_name(choice.isa), Provenance::measured, choice.reason},
        {"onednn isa", onednn_isa_name(effective), Provenance::measured,
         fmt::format("oneDNN {} get_effective_cpu_isa(){}", onednn::version_text(),
                     onednn_isa(choice.isa) == effective || choice.isa == Isa::reference
                         ? std::string()
                         : fmt::format("; this oneDNN has no {} tier", isa_name(choice.isa)))},
        {"memory",
         fmt::format("{:.1f} GiB", static_cast<double>(p.memory_capacity_bytes) / (1ull << 30)),
         Provenance::measured, "MemTotal from /proc/meminfo"},
        {"clock", fmt::format("{:.0f} MHz", mhz), Provenance::measured, "/proc/cpuinfo, current"},
    };
    p.precisions = precision_modes(features, choice.isa, dnnl::version()->major);
    for (const auto& [type, flops] : p.peak_flops) {
      p.table.push_back({fmt::format("peak {}", dtype_name(type)),
                         fmt::format("{:.1f} GFLOP/s", flops / 1e9), Provenance::derived,
                         "threads x /proc/cpuinfo clock x FLOP/cycle (2 FMA units assumed); a VM "
                         "often shows the base clock, so turbo peaks run higher"});
    }
    return p;
  }

  dnnl::engine engine_;
  Int8Choice int8_;
  bool avx512_;  // the ISA choice allows AVX-512 in our own loops too
  std::shared_ptr<PackedWeightCache> packed_weights_ = std::make_shared<PackedWeightCache>();
  std::shared_ptr<ThreadScratch> run_scratch_ = std::make_shared<ThreadScratch>();
  bool avx2_;  // the ISA choice allows AVX2 and FMA in our own loops (not the reference tier)
  std::uint64_t opened_rss_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  std::vector<OptionSpec> device_options() const override {
    using T = OptionSpec::Type;
    return {
        {"isa", T::choice, isa_option_names(), "auto",
         "highest ISA oneDNN may use (amx: avx512_core_amx, amx_fp16: avx512_core_amx_fp16)"},
        {"threads",
         T::integer,
         {},
         "0",
         "compute threads (0: OMP_NUM_THREADS if set, else the CPUs this process may run on)"},
    };
  }

 protected:
  std::vector<std::unique_ptr<Device>> do_open_devices(const DeviceOptions& options) override {
    const CpuFeatures features = detect_cpu_features();
    const IsaChoice choice = choose_isa(features, options.at("isa"));
    const dnnl::cpu_isa effective = apply_isa_cap(choice.isa);
    const int requested = std::stoi(options.at("threads"));
    if (requested < 0 || requested > kMaxThreads)
      throw ConfigError(fmt::format("key 'device.threads': expected 0 (every core) to {}, got {}",
                                    kMaxThreads, requested));
    const ThreadChoice threads =
        choose_threads(requested, std::getenv("OMP_NUM_THREADS"), affinity_cpu_count());
    omp_set_num_threads(threads.threads);
    spdlog::debug("cpu: isa {} ({}), oneDNN effective {}", isa_name(choice.isa), choice.reason,
                  onednn_isa_name(effective));
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(std::make_unique<CpuDevice>(features, choice, effective, threads));
    return devices;
  }
};

}  // namespace
}  // namespace polyhal::cpu

POLYHAL_PLUGIN("cpu", "0.1.0",
               "this x86-64 CPU through oneDNN (AMX or AVX-512 bf16 where it has them) and oneTBB",
               polyhal::cpu::CpuBackend)
