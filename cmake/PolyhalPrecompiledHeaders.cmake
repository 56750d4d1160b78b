# Precompiled headers for the large targets. Half of a test file's compile
# time was parsing the same standard, fmt, nlohmann/json and GoogleTest
# headers (gcc -ftime-report); parsed once per target, the whole build takes
# about a third less, which keeps CI's builds within its hour on 2 cores.
# POLYHAL_PRECOMPILED_HEADERS=OFF builds without them (to check that every
# file includes what it uses).
option(POLYHAL_PRECOMPILED_HEADERS "Precompile the common headers of the large targets" ON)

set(POLYHAL_COMMON_HEADERS
  <algorithm> <array> <chrono> <cmath> <cstdint> <cstring> <filesystem> <fstream> <functional>
  <map> <memory> <optional> <set> <stdexcept> <string> <string_view> <utility> <vector>
  <fmt/format.h> <fmt/ranges.h> <nlohmann/json.hpp>)

# polyhal_precompile_headers(TARGET [HEADER...]): the common headers and the
# given ones, precompiled for TARGET (each must be on its include path).
function(polyhal_precompile_headers target)
  if(POLYHAL_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${POLYHAL_COMMON_HEADERS} ${ARGN})
  endif()
endfunction()
