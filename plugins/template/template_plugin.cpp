// The template plugin: the smallest complete polyhal backend. It opens one
// device that keeps its memory on the host and runs every op (matmul, the
// BERT inference and training ops) through the core's portable reference
// kernels, so BERT runs end to end on it. Copy it, rename it (PLUGIN_NAME in
// CMakeLists.txt, the one place), then replace kernels with your own.
// docs/plugin-authors.md walks through it. A plugin includes only the
// contract, the headers directly in polyhal/ (abi.hpp lists them in reading
// order); polyhal/app/ is the framework's own API and refuses to compile here.
#include <polyhal/plugin.hpp>
#include <polyhal/reference_kernels.hpp>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "template"  // set by CMakeLists.txt
#endif

namespace {

class TemplateDevice final : public polyhal::Device {
 public:
  explicit TemplateDevice(std::uint64_t memory_bytes) : Device(properties(memory_bytes)) {
    // Every op in f32 from the portable reference kernels first; the core
    // refuses anything not registered at prepare time with a clear message.
    polyhal::register_reference_kernels(registry(), {polyhal::DType::f32},
                                        polyhal::MatMulNumerics{});
    // Then your own kernels replace the ones your device does better, e.g.:
    registry().add(polyhal::OpKind::matmul, polyhal::DType::f32,
                   [](const polyhal::KernelDesc& desc, polyhal::Device&) {
                     return polyhal::make_reference_matmul(desc, polyhal::MatMulNumerics{});
                   });
  }

 private:
  static polyhal::DeviceProperties properties(std::uint64_t memory_bytes) {
    polyhal::DeviceProperties p;
    p.name = PLUGIN_NAME "0";
    p.backend = PLUGIN_NAME;
    p.vendor = "Example";
    p.product = "Template accelerator";
    p.mode = polyhal::DeviceMode::hardware;
    p.dtypes = {polyhal::DType::f32};
    p.memory_capacity_bytes = memory_bytes;
    p.table = {{"memory", std::to_string(memory_bytes >> 20) + " MiB", polyhal::Provenance::derived,
                "device.memory_mib option"}};
    return p;
  }
};

class TemplateBackend final : public polyhal::Backend {
 public:
  std::string name() const override { return PLUGIN_NAME; }
  std::vector<polyhal::OptionSpec> device_options() const override {
    return {{"memory_mib", polyhal::OptionSpec::Type::integer, {}, "64", "device memory in MiB"}};
  }

 protected:
  std::vector<std::unique_ptr<polyhal::Device>> do_open_devices(
      const polyhal::DeviceOptions& options) override {
    std::vector<std::unique_ptr<polyhal::Device>> devices;
    devices.push_back(
        std::make_unique<TemplateDevice>(std::stoull(options.at("memory_mib")) << 20));
    return devices;
  }
};

}  // namespace

POLYHAL_PLUGIN(PLUGIN_NAME, "1.0.0", "Template backend: copy me to write a plugin", TemplateBackend)
