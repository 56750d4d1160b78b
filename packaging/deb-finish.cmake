# CPack post-build script for the DEB generator: the steps debhelper would
# take that CPack's generator does not (lintian checks each of them).
#  - dh_strip: drop the .comment and .note sections CPack's strip leaves.
#  - dh_makeshlibs: a symbols file for the shared library package, made by
#    dpkg-gensymbols from the library actually shipped; and the library is
#    registered with ldconfig by the package's trigger alone, so CPack's
#    postinst/postrm that call ldconfig (written before dpkg had triggers)
#    are dropped. Any other maintainer script is kept: this refuses to touch
#    a script it does not recognise.
# Each .deb is unpacked, finished, its md5sums rewritten and built again with
# root as the owner of every file, as dpkg-buildpackage would.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()

function(finish_run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT status EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "deb-finish: '${command}' failed (${status}): ${err}${out}")
  endif()
endfunction()

# CPack's ldconfig script, which a trigger makes redundant.
function(finish_is_cpack_ldconfig_script file result)
  file(READ "${file}" text)
  string(REGEX REPLACE "[ \t\n]+" " " text "${text}")
  if(text MATCHES "^#!/bin/sh set -e if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then ldconfig fi ?$")
    set(${result} TRUE PARENT_SCOPE)
  else()
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT deb MATCHES "\\.deb$")
    continue()
  endif()
  execute_process(COMMAND dpkg-deb -f "${deb}" Package Version OUTPUT_VARIABLE fields)
  string(REGEX MATCH "Package: ([^\n]+)" _ "${fields}")
  set(package "${CMAKE_MATCH_1}")
  # Symbols carry the upstream version: the Debian revision is not part of
  # the library's interface.
  string(REGEX MATCH "Version: ([^-\n]+)" _ "${fields}")
  set(upstream_version "${CMAKE_MATCH_1}")
  set(root "${CPACK_TOPLEVEL_DIRECTORY}/deb-finish/${package}")
  file(REMOVE_RECURSE "${root}")
  file(MAKE_DIRECTORY "${root}")
  finish_run(dpkg-deb -R "${deb}" "${root}")

  # Strip each ELF file, then checksum every file as it will ship.
  file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${root}" "${root}/usr/*")
  list(SORT files)
  set(ships_shared_library FALSE)
  set(md5sums "")
  foreach(file IN LISTS files)
    if(IS_SYMLINK "${root}/${file}")
      continue()
    endif()
    file(READ "${root}/${file}" magic LIMIT 4 HEX)
    if(magic STREQUAL "7f454c46")
      if(file MATCHES "\\.so(\\.[0-9]+)*$")
        finish_run(strip --remove-section=.comment --remove-section=.note --strip-unneeded "${root}/${file}")
      else()
        finish_run(strip --remove-section=.comment --remove-section=.note "${root}/${file}")
      endif()
      if(file MATCHES "^usr/lib/[^/]+/lib[^/]+\\.so\\.[0-9.]+$")
        set(ships_shared_library TRUE)
      endif()
    endif()
    file(MD5 "${root}/${file}" sum)
    string(APPEND md5sums "${sum}  ${file}\n")
  endforeach()
  file(WRITE "${root}/DEBIAN/md5sums" "${md5sums}")

  if(ships_shared_library AND EXISTS "${root}/DEBIAN/shlibs")
    finish_run(dpkg-gensymbols -p${package} -v${upstream_version} -P${root} -O${root}/DEBIAN/symbols -q)
    # Packages built against the -dev package get the dependency this file gives.
    file(READ "${root}/DEBIAN/symbols" symbols)
    # (After the first line, the library's; a REGEX REPLACE with ^ would
    # match again at every line.)
    string(FIND "${symbols}" "\n" first_line_end)
    math(EXPR rest_begin "${first_line_end} + 1")
    string(SUBSTRING "${symbols}" 0 ${rest_begin} first_line)
    string(SUBSTRING "${symbols}" ${rest_begin} -1 rest)
    set(symbols "${first_line}* Build-Depends-Package: ${CPACK_DEB_FINISH_DEV_PACKAGE}\n${rest}")
    file(WRITE "${root}/DEBIAN/symbols" "${symbols}")
    file(READ "${root}/DEBIAN/triggers" triggers)
    if(NOT triggers MATCHES "activate-noawait ldconfig")
      message(FATAL_ERROR "deb-finish: ${package} ships a shared library but no ldconfig trigger")
    endif()
    foreach(script postinst postrm)
      if(EXISTS "${root}/DEBIAN/${script}")
        finish_is_cpack_ldconfig_script("${root}/DEBIAN/${script}" redundant)
        if(NOT redundant)
          message(FATAL_ERROR "deb-finish: ${package}'s ${script} is not CPack's ldconfig script; "
                              "refusing to drop it")
        endif()
        file(REMOVE "${root}/DEBIAN/${script}")
      endif()
    endforeach()
  endif()

  file(REMOVE "${deb}")
  finish_run(dpkg-deb --root-owner-group -b "${root}" "${deb}")
  file(REMOVE_RECURSE "${root}")
endforeach()
