#!/bin/sh
# Checks that every C source and header of the project is formatted by the
# root .clang-format (clang-format 14). In a git checkout the files are the
# tracked ones; in an unpacked source tree (a package build) every .c and
# .h outside build directories.
# Exit status: 0 formatted, 1 a file is not (its diff is printed), 77
# clang-format missing (skipped; a failure under CI=true).
set -u
top=${FANHUB_SOURCE_DIR:-$(dirname "$0")/..}
cd "$top" || exit 1
format=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$format" ]; then
    echo "clang-format (14) is missing: scripts/deps installs it" >&2
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
list_files () {
    if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        git ls-files '*.c' '*.h'
    else
        find . \( -name build -o -name .git -o -name 'obj-*' -o -name debian \) -prune \
            -o \( -name '*.c' -o -name '*.h' \) -type f -print | sed 's|^\./||' | sort
    fi
}
files=$(list_files)
count=$(printf '%s\n' $files | grep -c .)
[ "$count" -gt 0 ] || { echo "no C file found under $top" >&2; exit 1; }
# One clang-format process checks them all (one a file took 40 s); only
# the files it names are diffed, so a failure still shows what to change.
# shellcheck disable=SC2086 # the names are git's, without blanks
if "$format" --style=file --dry-run -Werror $files 2> /dev/null; then
    echo "$count files formatted"
    exit 0
fi
status=0
for file in $files; do
    if ! "$format" --style=file "$file" | diff -u "$file" - >&2; then
        echo "$file: not formatted: run $format -i --style=file $file" >&2
        status=1
    fi
done
# clang-format failed on something else than a file's layout (it names it).
[ "$status" -eq 0 ] && "$format" --style=file --dry-run -Werror $files
exit 1
