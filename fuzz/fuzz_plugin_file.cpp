// A plugin file found on the search path: whatever its bytes (an ELF cut
// short, a wrong descriptor, a text file), `polyhal plugins` loads it in a
// child process and reports it in one line; this process must never fault.
#include "fuzz_input.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyhal::fuzz::as_file("libpolyhal_plugin_fuzzed.so", data, size);
  polyhal::PluginSearchOptions options;
  options.explicit_dirs = {polyhal::fuzz::scratch_dir()};
  options.use_environment = false;
  for (const auto& probed : polyhal::probe_plugins(options, {}, std::chrono::seconds(5))) {
    // A file the fuzzer made can be refused or crash the child; it loads
    // only if it is a real plugin, which it cannot be named for.
    if (probed.candidate.status == polyhal::PluginCandidate::Status::loaded) __builtin_trap();
    if (probed.candidate.reason.empty() || probed.candidate.reason.find('\n') != std::string::npos)
      __builtin_trap();
  }
  return 0;
}
