#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <iostream>

#include "metrics_writer.hpp"
#include "polyhal/config.hpp"
#include "polyhal/error.hpp"
#include "polyhal/inference_task.hpp"
#include "polyhal/matmul_bench.hpp"
#include "polyhal/mpi_collective.hpp"
#include "polyhal/plugin_loader.hpp"
#include "polyhal/pretrain_task.hpp"

namespace polyhal::launcher {
namespace {

PluginSearchOptions search_options(const CommonOptions& common,
                                   const std::vector<std::filesystem::path>& config_paths = {},
                                   bool config_allows_world_writable = false) {
  PluginSearchOptions options;
  options.explicit_dirs = common.plugin_paths;
  options.explicit_dirs.insert(options.explicit_dirs.end(), config_paths.begin(),
                               config_paths.end());
  options.executable_dir = common.executable_dir;
  options.allow_world_writable =
      common.allow_world_writable_plugins || config_allows_world_writable;
  return options;
}

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void print_device(const Device& device) {
  const auto& p = device.properties();
  std::cout << fmt::format("{}  [{}]  {} {}  mode: {}\n", p.name, p.backend, p.vendor, p.product,
                           device_mode_name(p.mode));
  std::size_t width = 4;
  for (const auto& row : p.table) width = std::max(width, row.name.size());
  for (const auto& row : p.table) {
    std::cout << fmt::format("  {:<{}}  {:<28}  {:<9}  {}\n", row.name, width, row.value,
                             provenance_name(row.source), row.note);
  }
}

std::shared_ptr<Device> open_first_device(Backend& backend, const DeviceOptions& options) {
  auto devices = backend.open_devices(options);
  if (devices.empty()) {
    throw DeviceUnavailableError(fmt::format("backend '{}' opened no devices", backend.name()));
  }
  return devices.front();
}

/// The first device of the config's backend, opened with the config's
/// device options. The device keeps its plugin library loaded.
std::shared_ptr<Device> open_configured_device(const CommonOptions& common,
                                               const RunConfig& config) {
  PluginLoader loader(
      search_options(common, config.plugin_paths, config.allow_world_writable_plugins));
  auto backend = loader.backend(config.backend);
  return open_first_device(*backend, config.resolve_device(backend->device_options()));
}

void configure_logging(const RunConfig& config) {
  // The command line's --log-level wins when it asked for more detail.
  const auto level = std::min(spdlog::get_level(), spdlog::level::from_str(config.log_level));
  spdlog::set_level(level);
  if (!config.log_file.empty()) {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(config.log_file.string(), true);
    sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%l] %v");
    spdlog::default_logger()->sinks().push_back(sink);
  }
}

void print_memory(const MemoryReport& report) {
  std::cout << fmt::format("  memory on {}: {} of {} -> {}\n", report.device,
                           mib(report.required_bytes), mib(report.capacity_bytes),
                           report.fits ? "fits" : "DOES NOT FIT");
  for (const auto& item : report.items) {
    std::cout << fmt::format("    {:<22} {:<6} {:>12}\n", item.category, item.name,
                             mib(item.bytes));
  }
  for (const auto& note : report.notes) std::cout << "    note: " << note << '\n';
}

int run_matmul(Device& device, const RunConfig& config, const RunOptions& run,
               MetricsWriter& metrics) {
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const auto results = run_matmul_bench(device, config.matmul_bench, run.compile_only);
  std::cout << fmt::format("matmul-bench on {} ({}{}), dtype {}\n", p.name, p.product,
                           model ? ", device model" : "", dtype_name(config.matmul_bench.dtype));
  bool all_fit = true;
  double best = 0.0;
  for (const auto& r : results) {
    const auto [m, n, k] = r.mnk;
    std::cout << fmt::format("M={} N={} K={}  kernel: {}\n", m, n, k, r.implementation);
    print_memory(r.memory);
    all_fit = all_fit && r.memory.fits;
    nlohmann::json record{{"event", "matmul"},
                          {"m", m},
                          {"n", n},
                          {"k", k},
                          {"implementation", r.implementation},
                          {"fits", r.memory.fits},
                          {"memory_required_bytes", r.memory.required_bytes}};
    if (r.host_seconds_per_run) {
      const double host_gflops = r.flops_per_run / *r.host_seconds_per_run / 1e9;
      record["host_seconds_per_run"] = *r.host_seconds_per_run;
      if (model) {
        record["host_simulation_gflops"] = host_gflops;
        std::cout << fmt::format(
            "  host simulation: {:.3f} ms/run ({:.2f} GFLOP/s on this host, not the device)\n",
            *r.host_seconds_per_run * 1e3, host_gflops);
      } else {
        record["gflops"] = host_gflops;
        best = std::max(best, host_gflops);
        std::cout << fmt::format("  measured: {:.3f} ms/run, {:.2f} GFLOP/s\n",
                                 *r.host_seconds_per_run * 1e3, host_gflops);
      }
    }
    if (r.estimated_seconds_per_run) {
      const double estimated = r.flops_per_run / *r.estimated_seconds_per_run / 1e9;
      record["estimated_gflops"] = estimated;
      best = std::max(best, estimated);
      std::cout << fmt::format(
          "  estimated (device model, not measured): {:.4f} ms/run, {:.1f} GFLOP/s\n",
          *r.estimated_seconds_per_run * 1e3, estimated);
    }
    metrics.write(record);
  }
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"product", p.product},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"model", "matmul"},
                         {"precision", std::string(dtype_name(config.matmul_bench.dtype))},
                         {"compile_only", run.compile_only},
                         {"fits", all_fit}};
  if (!run.compile_only) summary[model ? "estimated_gflops" : "gflops"] = best;
  metrics.write_summary(summary);
  if (run.compile_only && !all_fit) return static_cast<int>(ExitCode::failure);
  return 0;
}

int run_bert_inference(Device& device, const RunConfig& config, const RunOptions& run,
                       MetricsWriter& metrics) {
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const auto r = run_inference(device, config, run.compile_only);
  const std::string precision(dtype_name(config.model.precision));
  std::cout << fmt::format("inference: BERT {} (L{} H{} A{}), seq {}, batch {}, {} on {} ({}{})\n",
                           r.model_name, r.config.num_hidden_layers, r.config.hidden_size,
                           r.config.num_attention_heads, r.seq, r.batch, precision, p.name,
                           p.product, model ? ", device model" : "");
  print_memory(r.memory);
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"product", p.product},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"model", "bert-" + r.model_name},
                         {"precision", precision},
                         {"seq_len", r.seq},
                         {"global_batch", r.batch},
                         {"micro_batch", r.batch},
                         {"replicas", 1},
                         {"compile_only", run.compile_only},
                         {"fits", r.memory.fits},
                         {"memory_required_bytes", r.memory.required_bytes}};
  if (r.estimated_batch_seconds) {
    const double estimated = static_cast<double>(r.batch) / *r.estimated_batch_seconds;
    summary["estimated_sequences_per_second"] = estimated;
    std::cout << fmt::format(
        "  estimated (device model, not measured): {:.1f} sequences/s, {:.3f} ms per batch\n",
        estimated, *r.estimated_batch_seconds * 1e3);
  }
  if (!r.batch_seconds.empty()) {
    double total = 0;
    for (double s : r.batch_seconds) total += s;
    const double per_second =
        static_cast<double>(r.batch) * static_cast<double>(r.batch_seconds.size()) / total;
    const double p50 = percentile(r.batch_seconds, 50) * 1e3,
                 p99 = percentile(r.batch_seconds, 99) * 1e3;
    if (model) {
      summary["host_simulation_seconds_per_batch"] =
          total / static_cast<double>(r.batch_seconds.size());
      std::cout << fmt::format(
          "  host simulation: {:.1f} ms per batch (this host running the model, not the device)\n",
          total / static_cast<double>(r.batch_seconds.size()) * 1e3);
    } else {
      summary["sequences_per_second"] = per_second;
      summary["latency_p50_ms"] = p50;
      summary["latency_p99_ms"] = p99;
      summary["model_tflops"] =
          r.flops_per_batch * static_cast<double>(r.batch_seconds.size()) / total / 1e12;
      std::cout << fmt::format(
          "  measured: {:.1f} sequences/s; latency per batch p50 {:.2f} ms, p99 {:.2f} ms "
          "({} batches); {:.2f} TFLOP/s model FLOPs\n",
          per_second, p50, p99, r.batch_seconds.size(),
          r.flops_per_batch * static_cast<double>(r.batch_seconds.size()) / total / 1e12);
    }
  }
  if (r.text_examples > 0) {
    std::cout << fmt::format("  wrote {} examples to {}\n", r.text_examples,
                             config.inference.output.string());
  }
  metrics.write_summary(summary);
  if (run.compile_only && !r.memory.fits) return static_cast<int>(ExitCode::failure);
  return 0;
}

std::string clock_text(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, (total / 60) % 60, total % 60);
}

int run_bert_pretraining(Device& device, const RunConfig& config, const RunOptions& run,
                         MetricsWriter& metrics, Communicator* world) {
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const std::int64_t replicas = world ? world->size() : config.batch.replicas;
  const std::int64_t global_batch = replicas * config.batch.grad_accum * config.batch.micro;
  const bool terminal = ::isatty(STDOUT_FILENO) != 0;
  double elapsed = 0;
  std::int64_t timed = 0;
  const auto observer = [&](const PretrainStep& step, std::int64_t total) {
    elapsed += step.seconds;
    ++timed;
    const double per_step = elapsed / static_cast<double>(timed);
    const double sequences = static_cast<double>(global_batch) / step.seconds;
    metrics.write(
        {{"event", "step"},
         {"step", step.step},
         {"loss", step.loss()},
         {"mlm_loss", step.mlm_loss},
         {"nsp_loss", step.nsp_loss},
         {"learning_rate", step.learning_rate},
         {"grad_norm", step.skipped ? nlohmann::json(nullptr) : nlohmann::json(step.grad_norm)},
         {"loss_scale", step.loss_scale},
         {"skipped", step.skipped},
         {model ? "host_simulation_seconds" : "seconds", step.seconds}});
    const bool show = step.step % config.log_every == 0 || step.step == total;
    if (!show && !terminal) return;
    const std::string line =
        fmt::format("step {}/{}  loss {:.4f} (mlm {:.4f}, nsp {:.4f})  lr {:.3g}  {}  ETA {}",
                    step.step, total, step.loss(), step.mlm_loss, step.nsp_loss, step.learning_rate,
                    model ? fmt::format("host simulation {:.2f} s/step", step.seconds)
                          : fmt::format("{:.1f} sequences/s", sequences),
                    clock_text(per_step * static_cast<double>(total - step.step)));
    std::cout << (terminal ? "\r" : "") << line << (terminal && !show ? "" : "\n") << std::flush;
  };
  std::cout << fmt::format(
      "pretrain: BERT {} seq {}, micro-batch {} x grad_accum {} x replicas {} = global batch {}, "
      "{}, {} on {} ({})\n",
      config.model.hf_config.empty() ? config.model.preset : "custom", config.model.seq_len,
      config.batch.micro, config.batch.grad_accum, replicas, global_batch, config.optimizer.name,
      dtype_name(config.model.precision), p.name, p.product);
  const auto r = run_pretraining(device, config, run.compile_only, observer, world);
  print_memory(r.memory);
  if (r.estimated_all_reduce_seconds) {
    std::cout << fmt::format(
        "  estimated gradient all-reduce: {:.2f} ms per optimizer step ({:.1f} MiB f32 over {} "
        "replicas, {} model's links; estimate, not measured)\n",
        *r.estimated_all_reduce_seconds * 1e3,
        static_cast<double>(r.parameters) * 4.0 / (1024.0 * 1024.0), replicas, p.name);
  }
  if (r.unsharded_memory) {
    const auto state_bytes = [](const MemoryReport& m) {
      std::uint64_t bytes = 0;
      for (const auto& item : m.items)
        if (item.category == "optimizer state") bytes += item.bytes;
      return bytes;
    };
    const double mib = 1024.0 * 1024.0;
    const auto sharded = state_bytes(r.memory), whole = state_bytes(*r.unsharded_memory);
    std::cout << fmt::format(
        "  optimizer state sharded over {} replicas: {:.1f} MiB per replica instead of {:.1f} MiB "
        "(saves {:.1f} MiB: {:.1f} MiB per replica in all instead of {:.1f} MiB)\n",
        replicas, static_cast<double>(sharded) / mib, static_cast<double>(whole) / mib,
        static_cast<double>(whole - sharded) / mib,
        static_cast<double>(r.memory.required_bytes) / mib,
        static_cast<double>(r.unsharded_memory->required_bytes) / mib);
  }
  nlohmann::json summary{{"backend", config.backend},
                         {"device", p.name},
                         {"mode", std::string(device_mode_name(p.mode))},
                         {"task", config.task},
                         {"model", "bert-" + r.model_name},
                         {"precision", std::string(dtype_name(config.model.precision))},
                         {"seq_len", config.model.seq_len},
                         {"micro_batch", config.batch.micro},
                         {"grad_accum", config.batch.grad_accum},
                         {"replicas", replicas},
                         {"collective", config.collective.engine},
                         {"global_batch", global_batch},
                         {"optimizer", config.optimizer.name},
                         {"compile_only", run.compile_only},
                         {"fits", r.memory.fits},
                         {"first_step", r.first_step}};
  if (r.estimated_all_reduce_seconds)
    summary["estimated_all_reduce_seconds"] = *r.estimated_all_reduce_seconds;
  if (!r.steps.empty()) {
    double total = 0;
    for (const auto& s : r.steps) total += s.seconds;
    const double sequences =
        static_cast<double>(global_batch * static_cast<std::int64_t>(r.steps.size())) / total;
    summary["final_loss"] = r.steps.back().loss();
    summary["steps_run"] = r.steps.size();
    if (!model) summary["sequences_per_second"] = sequences;
    if (r.first_step > 1) std::cout << fmt::format("  resumed at step {}\n", r.first_step);
  }
  if (!r.profile.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& t : r.profile) {
      ops.push_back({{"op", t.op}, {"calls", t.calls}, {"seconds", t.seconds}});
      spdlog::debug("profile {:<22} {:>6} calls {:>9.3f} s  {}", t.op, t.calls, t.seconds,
                    t.implementation);
    }
    summary[model ? "host_simulation_profile" : "profile"] = ops;
  }
  if (!r.checkpoints.empty())
    std::cout << fmt::format("  last checkpoint: {}\n", r.checkpoints.back().string());
  if (!r.exported.empty()) {
    std::cout << fmt::format("  Hugging Face weights: {}\n", r.exported.string());
  }
  metrics.write_summary(summary);
  if (run.compile_only && !r.memory.fits) return static_cast<int>(ExitCode::failure);
  return 0;
}

/// A task the launcher can run: `plan` is the plan-time check that
/// `validate` runs (the program declared on the opened device, every op
/// checked against its kernels, data sources opened, nothing allocated);
/// `run` runs it (or plans only, with --compile-only) and reports.
struct TaskEntry {
  std::string_view name;
  bool multi_process;  ///< runs as one replica per mpirun rank (collective: mpi)
  std::string (*plan)(Device& device, const RunConfig& config);
  int (*run)(Device& device, const RunConfig& config, const RunOptions& run, MetricsWriter& metrics,
             Communicator* world);
};

std::string fit_summary(const MemoryReport& memory) {
  return fmt::format("{} of {} on {}: {}", mib(memory.required_bytes), mib(memory.capacity_bytes),
                     memory.device, memory.fits ? "fits" : "does not fit");
}

/// The tasks, by config key `task`. A new task is its run/plan functions
/// and one line here.
constexpr std::array kTasks{
    TaskEntry{
        "matmul-bench", false,
        [](Device& device, const RunConfig& config) {
          bool fits = true;
          for (const auto& r : run_matmul_bench(device, config.matmul_bench, true))
            fits = fits && r.memory.fits;
          return std::string(fits ? "every shape fits" : "a shape does not fit");
        },
        [](Device& device, const RunConfig& config, const RunOptions& run, MetricsWriter& metrics,
           Communicator*) { return run_matmul(device, config, run, metrics); }},
    TaskEntry{
        "inference", false,
        [](Device& device, const RunConfig& config) {
          return fit_summary(run_inference(device, config, true).memory);
        },
        [](Device& device, const RunConfig& config, const RunOptions& run, MetricsWriter& metrics,
           Communicator*) { return run_bert_inference(device, config, run, metrics); }},
    TaskEntry{"pretrain", true,
              [](Device& device, const RunConfig& config) {
                return fit_summary(run_pretraining(device, config, true, {}, nullptr).memory);
              },
              run_bert_pretraining},
};

const TaskEntry& task_named(const RunConfig& config) {
  for (const auto& task : kTasks) {
    if (task.name == config.task) return task;
  }
  std::vector<std::string_view> names;
  for (const auto& task : kTasks) names.push_back(task.name);
  throw ConfigError(fmt::format("{}: key 'task': unknown task '{}' (tasks: {})",
                                config.locate("task"), config.task, fmt::join(names, ", ")));
}

}  // namespace

int list_plugins(const CommonOptions& common) {
  const auto options = search_options(common);
  std::cout << "search path (first wins):\n";
  int index = 1;
  for (const auto& dir : plugin_search_dirs(options)) {
    std::error_code ec;
    std::cout << fmt::format("  {}. {} ({}){}\n", index++, dir.path.string(), dir.origin,
                             std::filesystem::is_directory(dir.path, ec) ? "" : " [missing]");
  }
  PluginLoader loader(options);
  std::cout << "plugins:\n";
  if (loader.candidates().empty()) std::cout << "  none found\n";
  for (const auto& c : loader.candidates()) {
    if (c.status == PluginCandidate::Status::loaded) {
      std::cout << fmt::format("  {:<8} {:<8} ABI {:<5} loaded    {}\n           {}\n", c.name,
                               c.version, c.abi, c.path.string(), c.summary);
    } else {
      std::cout << fmt::format("  {:<8} {:<8} {:<9} {:<9} {}\n           reason: {}\n",
                               c.name.empty() ? "?" : c.name, c.version.empty() ? "-" : c.version,
                               c.abi.empty() ? "-" : "ABI " + c.abi, plugin_status_name(c.status),
                               c.path.string(), c.reason);
    }
  }
  const auto names = loader.backend_names();
  std::cout << fmt::format("backends: {}\n",
                           names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  return 0;
}

int list_devices(const CommonOptions& common, const std::optional<std::string>& backend_name,
                 const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> given;
  for (const auto& text : overrides) {
    const auto eq = text.find('=');
    if (!text.starts_with("device.") || eq == std::string::npos) {
      throw UsageError(
          fmt::format("--set {}: 'devices' takes only device options, as device.NAME=value", text));
    }
    given[text.substr(7, eq - 7)] = text.substr(eq + 1);
  }
  if (!given.empty() && !backend_name) throw UsageError("--set device.* needs --backend NAME");
  PluginLoader loader(search_options(common));
  std::vector<std::string> names =
      backend_name ? std::vector{*backend_name} : loader.backend_names();
  if (names.empty()) throw PluginError("no backends are loaded; run 'polyhal plugins' to see why");
  for (const auto& name : names) {
    auto backend = loader.backend(name);
    const auto options = resolve_device_options(backend->device_options(), given);
    for (const auto& device : backend->open_devices(options)) print_device(*device);
  }
  return 0;
}

int validate_config(const CommonOptions& common, const RunOptions& run) {
  RunConfig config = load_run_config(run.config, run.overrides);
  if (run.backend) config.backend = *run.backend;
  PluginLoader loader(
      search_options(common, config.plugin_paths, config.allow_world_writable_plugins));
  auto backend = loader.backend(config.backend);
  const auto device = open_first_device(*backend, config.resolve_device(backend->device_options()));
  // The run's plan-time checks: an op the device lacks, data that cannot be
  // read or a model that cannot be built fails here as it would at `run`.
  const std::string plan = task_named(config).plan(*device, config);
  std::cout << fmt::format("{}: ok (backend {}, task {}; {})\n", run.config.string(),
                           config.backend, config.task, plan);
  return 0;
}

/// `collective: mpi`: this process is one rank of an mpirun job and one
/// replica. Rank 0 reports (stdout, metrics, checkpoints); the others only
/// log warnings and errors, prefixed with their rank. Any error on any rank
/// tears the whole job down (MPI_Abort) with that error's exit code, so no
/// rank is left waiting for a peer that will never come.
int run_mpi_pretraining(const CommonOptions& common, const RunOptions& run, RunConfig config) {
  const TaskEntry& task = task_named(config);
  if (!task.multi_process) {
    throw ConfigError(fmt::format("{}: key 'collective': mpi applies to task pretrain, not {}",
                                  config.locate("collective"), config.task));
  }
  MpiRuntime mpi;
  const int rank = mpi.rank();
  try {
    const auto world = make_mpi_communicator(
        mpi, std::chrono::milliseconds(
                 static_cast<std::int64_t>(config.collective.timeout_seconds * 1000.0)));
    RunOptions options = run;
    std::streambuf* saved_cout = std::cout.rdbuf();
    if (rank != 0) {
      options.metrics_out.clear();
      std::cout.rdbuf(nullptr);  // only rank 0 prints progress
    }
    configure_logging(config);
    if (rank != 0) {
      spdlog::set_level(spdlog::level::warn);
      spdlog::set_pattern(fmt::format("[rank {}] [%l] %v", rank));
    }
    MetricsWriter metrics(options.metrics_out);
    auto device = open_configured_device(common, config);
    spdlog::info("rank {} of {}: backend {} device {}", rank, mpi.size(), config.backend,
                 device->name());
    const int code = task.run(*device, config, options, metrics, world.get());
    world->barrier();  // nobody finalises while a peer still needs it
    std::cout.rdbuf(saved_cout);
    return code;
  } catch (const Error& e) {
    std::cerr << fmt::format("polyhal: error: rank {} of {}: {}\n", rank, mpi.size(), e.what());
    if (mpi.size() > 1) mpi.abort(static_cast<int>(e.exit_code()));
    throw;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("polyhal: error: rank {} of {}: {}\n", rank, mpi.size(), e.what());
    if (mpi.size() > 1) mpi.abort(static_cast<int>(ExitCode::failure));
    throw;
  }
}

int run_workload(const CommonOptions& common, const RunOptions& run) {
  RunConfig config = load_run_config(run.config, run.overrides);
  if (run.backend) config.backend = *run.backend;
  if (config.collective.engine == "mpi") return run_mpi_pretraining(common, run, config);
  configure_logging(config);
  MetricsWriter metrics(run.metrics_out);
  auto device = open_configured_device(common, config);

  spdlog::info("backend {} device {} ({}, mode {})", config.backend, device->name(),
               device->properties().product, device_mode_name(device->properties().mode));
  return task_named(config).run(*device, config, run, metrics, nullptr);
}

}  // namespace polyhal::launcher
