#pragma once
/// @file backend.hpp
/// Backend: the one object a plugin creates. It describes its device options
/// and opens devices.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// A device option a backend accepts under the config's `device:` section.
/// The core validates values against this before the backend sees them, so
/// errors name the config file, line and key.
struct OptionSpec {
  enum class Type { string, integer, number, boolean, choice };
  std::string name;
  Type type = Type::string;
  std::vector<std::string> choices;  ///< for Type::choice
  std::string default_value;
  std::string help;
};

/// Validated device options, by name; every declared option is present
/// (defaults filled in).
using DeviceOptions = std::map<std::string, std::string>;

class Backend {
 public:
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;
  /// The options this backend's devices accept.
  virtual std::vector<OptionSpec> device_options() const = 0;

  /// Opens the devices `options` describe. `options` must have been produced
  /// by resolve_device_options. Throws DeviceUnavailableError when the
  /// devices cannot be used (e.g. hardware mode without the vendor runtime).
  /// The devices share the backend's collective engine, if it has one
  /// (Device::collective_engine).
  std::vector<std::shared_ptr<Device>> open_devices(const DeviceOptions& options);

 protected:
  Backend() = default;
  virtual std::vector<std::unique_ptr<Device>> do_open_devices(const DeviceOptions& options) = 0;
  /// The engine that runs collectives between the devices `options`
  /// describe (collective.hpp has its rules), or nullptr, the default: the
  /// core's in-process and MPI engines run them all. Called once per
  /// open_devices, after do_open_devices.
  virtual std::unique_ptr<CollectiveEngine> do_make_collective_engine(const DeviceOptions& options);

 private:
  friend class PluginLoader;
  std::shared_ptr<const void> library_anchor_;
};

/// Fills defaults and checks `given` against `specs`. Throws ConfigError with
/// "key 'device.<name>': ..." messages; the config layer adds file and line.
DeviceOptions resolve_device_options(const std::vector<OptionSpec>& specs,
                                     const std::map<std::string, std::string>& given);

/// Wraps a plugin-created object so that deleting it happens while the plugin
/// library is still loaded, and the library stays loaded while it lives.
template <class T>
std::shared_ptr<T> anchor_to_library(std::unique_ptr<T> object,
                                     std::shared_ptr<const void> anchor) {
  T* raw = object.release();
  return std::shared_ptr<T>(raw, [anchor = std::move(anchor)](T* p) { delete p; });
}

}  // namespace polyhal
