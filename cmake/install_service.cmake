# Installs what names installed paths: the systemd units, sysusers.d and
# tmpfiles.d files, the logrotate file, the collectd snippets, the
# production /etc/fanhub/fanhub.yaml and the docs. Run at install time
# (install(CODE) in the top CMakeLists.txt), so that the paths are those of
# the prefix actually installed to (`cmake --install --prefix P` too), not
# the one configured. The sources are written for PREFIX=/usr; each
# /usr/bin/fanhub, /etc/fanhub/ and /usr/share/fanhub/ in them becomes the
# installed binary, sysconfdir and datadir. DESTDIR is added by
# file(INSTALL), as for every other install rule.
#
# Set by the caller: FH_SRC (the source tree), FH_BIN (the build tree),
# FH_BINDIR, FH_SYSCONFDIR, FH_DATADIR, FH_DOCDIR, FH_UNITDIR (as
# configured: relative to the prefix, or absolute).

set(P "${CMAKE_INSTALL_PREFIX}")
function(fh_full var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "${P}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
fh_full(bindir "${FH_BINDIR}")
fh_full(datadir "${FH_DATADIR}")
fh_full(docdir "${FH_DOCDIR}")
fh_full(unitdir "${FH_UNITDIR}")
# GNUInstallDirs' rule for the configuration directory, applied to the
# prefix installed to: /usr -> /etc, /opt/X -> /etc/opt/X, else PREFIX/etc.
if(IS_ABSOLUTE "${FH_SYSCONFDIR}")
  set(sysconfdir "${FH_SYSCONFDIR}")
elseif(P STREQUAL "/usr")
  set(sysconfdir "/etc")
elseif(P MATCHES "^/opt/")
  set(sysconfdir "/etc${P}")
else()
  set(sysconfdir "${P}/${FH_SYSCONFDIR}")
endif()
# One staging folder per destination: tests install one build tree into
# several prefixes at once, and each would wipe a shared one.
string(MD5 out_key "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(out "${FH_BIN}/installed/${out_key}")
file(REMOVE_RECURSE "${out}")

# Copies SRC to the staging folder with the installed paths, as NAME.
function(fh_paths src name)
  file(READ "${FH_SRC}/${src}" text)
  string(REPLACE "/usr/bin/fanhub" "${bindir}/fanhub" text "${text}")
  string(REPLACE "/etc/fanhub/" "${sysconfdir}/fanhub/" text "${text}")
  string(REPLACE "/usr/share/fanhub/" "${datadir}/fanhub/" text "${text}")
  file(WRITE "${out}/${name}" "${text}")
endfunction()

fh_paths(config/systemd/fanhub.service fanhub.service)
fh_paths(config/systemd/fanhub@.service fanhub@.service)
file(INSTALL "${out}/fanhub.service" "${out}/fanhub@.service" DESTINATION "${unitdir}")
# Not LIBDIR: systemd reads PREFIX/lib/*.d on every architecture.
file(INSTALL "${FH_SRC}/config/systemd/fanhub.sysusers" DESTINATION "${P}/lib/sysusers.d"
     RENAME fanhub.conf)
file(INSTALL "${FH_SRC}/config/systemd/fanhub.tmpfiles" DESTINATION "${P}/lib/tmpfiles.d"
     RENAME fanhub.conf)
file(INSTALL "${FH_SRC}/config/logrotate/fanhub" DESTINATION "${sysconfdir}/logrotate.d")
foreach(conf fanhub-exec.conf fanhub-unixsock.conf)
  fh_paths(config/collectd/${conf} ${conf})
  file(INSTALL "${out}/${conf}" DESTINATION "${datadir}/fanhub/collectd")
endforeach()

# The production configuration, never over an existing one: a re-install
# keeps the operator's file (the Debian package marks it a conffile).
fh_paths(config/production.yaml fanhub.yaml)
if(NOT EXISTS "$ENV{DESTDIR}${sysconfdir}/fanhub/fanhub.yaml")
  file(INSTALL "${out}/fanhub.yaml" DESTINATION "${sysconfdir}/fanhub"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
file(MAKE_DIRECTORY "$ENV{DESTDIR}${sysconfdir}/fanhub/conf.d")

# The docs, as in the source tree (README.md beside docs/, the pictures
# beside performance.md). A relative link to something installed elsewhere
# is pointed there; one to something not installed (the hub's sources, the
# manual pages' sources) becomes its text, so every link resolves.
function(fh_doc_target srcpath var)
  set(to "")
  if(srcpath MATCHES "^(README.md|docs)$" OR (srcpath MATCHES "^docs/" AND NOT srcpath MATCHES "^docs/man"))
    set(to "${docdir}/${srcpath}")
  elseif(srcpath STREQUAL "config")
    set(to "${datadir}/fanhub")
  elseif(srcpath MATCHES "^config/(fanhub\\.yaml|examples/[^/]*\\.yaml|examples|collectd|collectd/[^/]*\\.conf)$")
    string(REGEX REPLACE "^config/" "${datadir}/fanhub/" to "${srcpath}")
  endif()
  set(${var} "${to}" PARENT_SCOPE)
endfunction()

function(fh_doc src)
  file(READ "${FH_SRC}/${src}" text)
  get_filename_component(dir "${src}" DIRECTORY)
  get_filename_component(installed_dir "${docdir}/${src}" DIRECTORY)
  # "](" is marked first: an element starting with "]" breaks a CMake list.
  string(REPLACE "](" "@FHLINK@(" text "${text}")
  string(REGEX MATCHALL "@FHLINK@\\([^)# ]+(#[^) ]*)?\\)" links "${text}")
  if(links)
    list(REMOVE_DUPLICATES links)
  endif()
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^@FHLINK@\\(([^)#]+).*$" "\\1" target "${link}")
    string(REGEX REPLACE "^@FHLINK@\\([^)#]+(.*)\\)$" "\\1" anchor "${link}")
    if(target MATCHES "^[a-z]+:")
      continue() # https:, mailto:
    endif()
    get_filename_component(abs "${FH_SRC}/${dir}/${target}" ABSOLUTE)
    file(RELATIVE_PATH srcpath "${FH_SRC}" "${abs}")
    fh_doc_target("${srcpath}" to)
    if(to)
      file(RELATIVE_PATH rel "${installed_dir}" "${to}")
      if(target MATCHES "/$")
        set(rel "${rel}/")
      endif()
      string(REPLACE "${link}" "](${rel}${anchor})" text "${text}")
    else()
      string(REGEX REPLACE "([().*+?^$|\\])" "\\\\\\1" quoted "${link}")
      string(REGEX REPLACE "\\[([^][@]*)${quoted}" "\\1" text "${text}")
    endif()
  endforeach()
  string(REPLACE "@FHLINK@(" "](" text "${text}")
  get_filename_component(dest "${docdir}/${src}" DIRECTORY)
  file(WRITE "${out}/doc/${src}" "${text}")
  file(INSTALL "${out}/doc/${src}" DESTINATION "${dest}")
endfunction()

file(GLOB_RECURSE docs RELATIVE "${FH_SRC}" "${FH_SRC}/docs/*.md")
foreach(doc README.md ${docs})
  fh_doc("${doc}")
endforeach()
file(GLOB pictures "${FH_SRC}/docs/*.png")
file(INSTALL ${pictures} DESTINATION "${docdir}/docs")
