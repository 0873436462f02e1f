# fanhub_pkg_normalise(TARGET...): gives each pkg-config imported target
# the same include flags on every configure.
#
# Debian's libzmq and libczmq .pc files carry `-isystem DIR` in Cflags.
# pkg_check_modules puts DIR among the include directories on the first
# configure but leaves it in the compile options on later ones (its cache
# differs), so the flags change, and every object is rebuilt, the second
# time a build tree is configured. Here every -isystem DIR becomes an
# include directory (an imported target's include directories are system
# ones already), duplicates go, and the order is the order of appearance.
function(fanhub_pkg_normalise)
  foreach(target ${ARGN})
    get_target_property(options ${target} INTERFACE_COMPILE_OPTIONS)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT options)
      set(options "")
    endif()
    if(NOT dirs)
      set(dirs "")
    endif()
    set(kept "")
    set(next_is_dir FALSE)
    foreach(option ${options})
      if(next_is_dir)
        list(APPEND dirs "${option}")
        set(next_is_dir FALSE)
      elseif(option STREQUAL "-isystem")
        set(next_is_dir TRUE)
      elseif(option MATCHES "^-isystem(.+)$")
        list(APPEND dirs "${CMAKE_MATCH_1}")
      else()
        list(APPEND kept "${option}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES dirs)
    set_target_properties(${target} PROPERTIES
      INTERFACE_COMPILE_OPTIONS "${kept}"
      INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
  endforeach()
endfunction()
