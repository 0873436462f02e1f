"""Files stay small enough to read: no product C file over 800 lines, no
function of one over 80 (issue 29), and no test file (C or Python, under
tests/) over 1,000 (issue 40). Lists every offender as FILE:LINE and exits
1 when there is one. Functions are found in the project's own style: the
name's line starts the definition, and the body is a '{' and a '}' alone in
column 0 (what .clang-format writes).

Usage: /usr/bin/python3 tests/size_check.py [ROOT]   (default: the tree)
ctest runs it as lint.size.
"""
import os
import re
import subprocess
import sys

FILE_MAX = 800
FUNCTION_MAX = 80
PRODUCT = ("hub", "consumers", "include", "sdk")
TEST_FILE_MAX = 1000
TESTS = ("tests",)


def tracked_files(root, tops, suffixes):
    """The tracked files of tops ending in one of suffixes; in an unpacked
    source tree (a package build, no git) every one under tops."""
    git = subprocess.run(["git", "-C", root, "ls-files", *tops], capture_output=True,
                         text=True)
    if git.returncode == 0:
        listed = git.stdout.split()
    else:
        listed = [os.path.relpath(os.path.join(d, f), root)
                  for top in tops for d, _, files in os.walk(os.path.join(root, top))
                  for f in files]
    return sorted(f for f in listed if f.endswith(suffixes))


def long_functions(lines):
    """(line number of the name, name, lines from '{' to '}') of each
    function longer than FUNCTION_MAX."""
    found = []
    i = 0
    while i < len(lines):
        if lines[i] == "{" and i > 0:
            j = i - 1
            while j > 0 and "(" not in lines[j]:
                j -= 1
            names = re.findall(r"([A-Za-z_]\w*)\s*\(", lines[j])
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            length = k - i + 1
            if length > FUNCTION_MAX:
                found.append((j + 1, names[0] if names else "?", length))
            i = k
        i += 1
    return found


def read_lines(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "FANHUB_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    offences = []
    for path in tracked_files(root, PRODUCT, (".c", ".h")):
        lines = read_lines(root, path)
        if len(lines) - 1 > FILE_MAX:
            offences.append("%s: %d lines (at most %d)" % (path, len(lines) - 1, FILE_MAX))
        for line, name, length in long_functions(lines):
            offences.append("%s:%d: %s is %d lines (at most %d)"
                            % (path, line, name, length, FUNCTION_MAX))
    for path in tracked_files(root, TESTS, (".c", ".h", ".py")):
        lines = read_lines(root, path)
        if len(lines) - 1 > TEST_FILE_MAX:
            offences.append("%s: %d lines (at most %d for a test file)"
                            % (path, len(lines) - 1, TEST_FILE_MAX))
    for offence in offences:
        print(offence)
    print("%d passed, %d failed" % (0 if offences else 1, 1 if offences else 0))
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
