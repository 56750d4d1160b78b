#pragma once
// Fuzz targets read files the way users give them: each input is written to
// a file in a private directory made once per process (mkdtemp), and the
// target parses that file. Only polyhal::Error is an expected outcome of bad
// input; any other exception, a crash or a sanitizer report is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace polyhal::fuzz {

inline std::filesystem::path scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "polyhal-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ::abort();
    return std::filesystem::path(pattern);
  }();
  return dir;
}

/// `data` as the file `name` in the scratch directory.
inline std::filesystem::path as_file(const std::string& name, const std::uint8_t* data,
                                     std::size_t size) {
  const auto path = scratch_dir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace polyhal::fuzz
