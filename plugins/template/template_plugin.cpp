// The template plugin: the smallest complete polyhal backend. It opens one
// device that keeps its memory on the host and runs matmul through the
// core's portable reference kernel. Copy it, rename it, replace the kernel.
#include <polyhal/plugin.hpp>
#include <polyhal/reference_kernels.hpp>

namespace {

class TemplateDevice final : public polyhal::Device {
 public:
  explicit TemplateDevice(std::uint64_t memory_bytes) : Device(properties(memory_bytes)) {
    // Register every (op, dtype) the device implements; the core refuses
    // the rest at prepare time with a clear message.
    registry().add(polyhal::OpKind::matmul, polyhal::DType::f32,
                   [](const polyhal::KernelDesc& desc, polyhal::Device&) {
                     return polyhal::make_reference_matmul(desc, polyhal::MatMulNumerics{});
                   });
  }

 private:
  static polyhal::DeviceProperties properties(std::uint64_t memory_bytes) {
    polyhal::DeviceProperties p;
    p.name = "template0";
    p.backend = "template";
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
  std::string name() const override { return "template"; }
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

POLYHAL_PLUGIN("template", "1.0.0", "Template backend: copy me to write a plugin", TemplateBackend)
