# polyhal_set_warnings(<target>): the project's warning set, errors when
# POLYHAL_WARNINGS_AS_ERRORS is on (CI). Applied per target, never globally.
function(polyhal_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wno-sign-conversion -Wnon-virtual-dtor)
  if(POLYHAL_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
