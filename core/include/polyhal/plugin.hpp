#pragma once
/// @file plugin.hpp
/// For plugin authors: include this once in the file that defines your
/// Backend and write
///
///     POLYHAL_PLUGIN("myaccel", "1.0.0", "My accelerator", MyBackend)
///
/// It defines the descriptor (see abi.hpp) and exports its entry point as the
/// Boost.DLL alias `polyhal_plugin_entry`. plugins/template is a complete,
/// tested example.
#include <boost/dll/alias.hpp>

#include "polyhal/abi.hpp"
#include "polyhal/backend.hpp"
#include "polyhal/boundary_layout.hpp"

#define POLYHAL_PLUGIN(NAME, VERSION, SUMMARY, BACKEND_CLASS)                         \
  namespace polyhal_plugin_detail {                                                   \
  polyhal::Backend* create_backend() {                                                \
    return new BACKEND_CLASS();                                                       \
  }                                                                                   \
  const polyhal_plugin_descriptor descriptor{sizeof(polyhal_plugin_descriptor),       \
                                             polyhal::kAbiMajor,                      \
                                             polyhal::kAbiMinor,                      \
                                             polyhal::kOpSchemaVersion,               \
                                             NAME,                                    \
                                             VERSION,                                 \
                                             POLYHAL_COMPILER_ID,                     \
                                             POLYHAL_STDLIB_ID,                       \
                                             SUMMARY,                                 \
                                             &create_backend,                         \
                                             polyhal::boundary_layout_fingerprint()}; \
  const polyhal_plugin_descriptor* polyhal_plugin_entry_impl() {                      \
    return &descriptor;                                                               \
  }                                                                                   \
  BOOST_DLL_ALIAS(polyhal_plugin_entry_impl, polyhal_plugin_entry)                    \
  }
