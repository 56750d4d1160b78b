#pragma once
/// @file abi.hpp
/// The plugin boundary's version and descriptor: read this first.
///
/// A plugin exports exactly one symbol, the Boost.DLL alias
/// `polyhal_plugin_entry`, a function returning a pointer to a plain-C
/// `polyhal_plugin_descriptor`. The host reads the descriptor's size, ABI
/// version, toolchain identity, op-schema version (op_schema.hpp) and the
/// sizes of the boundary classes (boundary_layout.hpp) *before* any C++
/// object crosses the boundary, and refuses a plugin that does not match with
/// a sentence naming both sides. Only then does it call `create_backend`.
///
/// The contract is the headers directly in core/include/polyhal, and only
/// they: a plugin includes nothing else (polyhal/app/ is the framework's own
/// API and refuses to compile in a plugin). Read them in this order:
/// abi.hpp, plugin.hpp, backend.hpp, device.hpp, kernel.hpp, op_schema.hpp,
/// tensor.hpp, dtype.hpp, int8.hpp, property.hpp, collective.hpp, error.hpp, then
/// what a plugin may reuse: reference_kernels.hpp, train_kernels.hpp,
/// dropout_mask.hpp, parallel.hpp; boundary_layout.hpp guards their layout.
///
/// ABI rules: the major version changes when any class of the contract
/// changes layout or virtual table; the host accepts a plugin with the same
/// major and a minor no newer than its own. docs/abi-changelog.md has one entry
/// per version.
#include <cstddef>
#include <cstdint>

namespace polyhal {
class Backend;

inline constexpr std::uint32_t kAbiMajor = 8;
inline constexpr std::uint32_t kAbiMinor = 0;

/// Identity of the C++ toolchain, compared between host and plugin because
/// C++ objects (std::string, exceptions, vtables) cross the boundary.
/// Format: "<stdlib> <cxx11-abi flag>"; compiler version is informative only.
#if defined(__GLIBCXX__)
#define POLYHAL_STDLIB_ID_STR_(x) #x
#define POLYHAL_STDLIB_ID_STR(x) POLYHAL_STDLIB_ID_STR_(x)
#define POLYHAL_STDLIB_ID "libstdc++ cxx11-abi=" POLYHAL_STDLIB_ID_STR(_GLIBCXX_USE_CXX11_ABI)
#elif defined(_LIBCPP_VERSION)
#define POLYHAL_STDLIB_ID "libc++"
#else
#define POLYHAL_STDLIB_ID "unknown-stdlib"
#endif

#if defined(__clang__)
#define POLYHAL_COMPILER_ID "clang " __clang_version__
#elif defined(__GNUC__)
#define POLYHAL_COMPILER_ID "gcc " __VERSION__
#else
#define POLYHAL_COMPILER_ID "unknown-compiler"
#endif
}  // namespace polyhal

extern "C" {
/// Plain-C plugin descriptor. Field order is frozen: new fields go at the end
/// and `struct_size` tells the host which ones a plugin has.
struct polyhal_plugin_descriptor {
  std::uint32_t struct_size;        ///< sizeof(polyhal_plugin_descriptor) in the plugin
  std::uint32_t abi_major;          ///< polyhal::kAbiMajor the plugin was built with
  std::uint32_t abi_minor;          ///< polyhal::kAbiMinor the plugin was built with
  std::uint32_t op_schema_version;  ///< polyhal::kOpSchemaVersion (since ABI 2; was zero)
  const char* name;                 ///< backend name users type: "cpu", "ipu", ...
  const char* version;              ///< plugin version, free text
  const char* compiler;             ///< POLYHAL_COMPILER_ID
  const char* stdlib;               ///< POLYHAL_STDLIB_ID
  const char* summary;              ///< one line for `polyhal plugins`
  /// Creates the backend; called only after the host accepted the fields
  /// above. The caller owns the result. May throw polyhal::Error.
  polyhal::Backend* (*create_backend)();
  /// polyhal::boundary_layout_fingerprint() in the plugin (since ABI 2): the
  /// sizes and alignments of every class that crosses the boundary.
  std::uint64_t boundary_layout;
};
}

// The boundary struct's size is part of the ABI; change it only with a major bump.
static_assert(sizeof(polyhal_plugin_descriptor) == 16 + 6 * sizeof(void*) + 8,
              "polyhal_plugin_descriptor layout changed: bump kAbiMajor");
