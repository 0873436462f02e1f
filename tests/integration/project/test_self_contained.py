"""The repository stands on its own, its scripts explain themselves, and
its build tree is stable.

- No file of the project refers to anything beside the repository (the
  sibling `shared` folder the project grew up next to): a fresh clone has
  only itself.
- `scripts/test`, `scripts/demo`, `scripts/bench`, `scripts/package` and
  `scripts/deps` with --help print their usage and exit 0, doing nothing
  else: cmake, apt-get, dpkg-query, sudo, git, dpkg-buildpackage and
  rpmbuild are stubs that note being called, and none is.
- Configuring a build tree a second time with the same arguments changes
  no compile or link flag, so nothing is rebuilt (Debian's libzmq and
  libczmq .pc files carry `-isystem` flags that CMake placed differently on
  the first configure than on later ones; cmake/pkg_normalise.cmake).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

# Spelled in two pieces so that this file does not match itself.
OUTSIDE = ".." + "/shared"
# What is not the project's own text: git's store, build trees, outputs.
NOT_SOURCE = {".git", "build", "bench-results", "__pycache__"}


def project_files():
    for root, dirs, files in os.walk(fh.SOURCE_DIR):
        dirs[:] = [d for d in dirs if d not in NOT_SOURCE and not d.startswith("build")]
        for name in files:
            yield os.path.join(root, name)


def test_nothing_refers_outside_the_repository():
    offenders = []
    scanned = 0
    for path in project_files():
        with open(path, "rb") as f:
            data = f.read()
        scanned += 1
        if OUTSIDE.encode() in data:
            offenders.append(os.path.relpath(path, fh.SOURCE_DIR))
    # The walk saw the project (a wrong SOURCE_DIR would pass vacuously).
    assert scanned > 100, "only %d files under %s" % (scanned, fh.SOURCE_DIR)
    for must in ("scripts/bench", "scripts/demo", "scripts/test", "tests/CMakeLists.txt"):
        assert os.path.exists(os.path.join(fh.SOURCE_DIR, must)), must
    assert not offenders, "files referring to %s: %s" % (OUTSIDE, offenders)


def test_scripts_help_does_nothing_else():
    wd = fh.Workdir()
    stubs = wd.file("stubs")
    os.mkdir(stubs)
    called = wd.file("called")
    for tool in ("cmake", "ctest", "apt-get", "dpkg-query", "sudo", "make", "gcc", "clang",
                 "git", "dpkg-buildpackage", "rpmbuild", "lintian"):
        path = os.path.join(stubs, tool)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho %s >> %s\nexit 1\n" % (tool, called))
        os.chmod(path, 0o755)
    env = dict(os.environ, PATH=stubs + ":/usr/bin:/bin")
    for script in ("test", "demo", "bench", "package", "deps"):
        for flag in ("--help", "-h"):
            proc = subprocess.run([os.path.join(fh.SOURCE_DIR, "scripts", script), flag],
                                  capture_output=True, env=env, timeout=fh.DEADLINE)
            out = proc.stdout.decode()
            assert proc.returncode == 0, (script, flag, proc.returncode, proc.stderr)
            assert re.search(r"^(usage: |Usage: )?scripts/%s" % script, out, re.M | re.I), \
                (script, out)
            assert not os.path.exists(called), (script, flag, open(called).read())
    # A mistyped option is refused (status 2, named), and nothing runs:
    # scripts/deps once took one for a package name to install.
    for args in (["package", "--bogus"], ["package", "--out"], ["deps", "--bogus"]):
        proc = subprocess.run([os.path.join(fh.SOURCE_DIR, "scripts", args[0])] + args[1:],
                              capture_output=True, env=env, timeout=fh.DEADLINE)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "scripts/%s: " % args[0] in err and args[-1] in err, \
            (args, proc.returncode, err)
        assert not os.path.exists(called), (args, open(called).read())
    wd.cleanup()


def flags_of(build):
    """Every compile and link flag file of the build tree, by path."""
    flags = {}
    for root, _, files in os.walk(build):
        for name in files:
            if name in ("flags.make", "link.txt"):
                path = os.path.join(root, name)
                with open(path) as f:
                    flags[os.path.relpath(path, build)] = f.read()
    return flags


def test_reconfiguring_changes_no_flag():
    wd = fh.Workdir()
    build = wd.file("build")
    configure = ["cmake", "-S", fh.SOURCE_DIR, "-B", build, "-G", "Unix Makefiles",
                 "-DFANHUB_WERROR=ON"]
    first = second = None
    for run in (1, 2):
        proc = subprocess.run(configure, capture_output=True, timeout=fh.DEADLINE)
        assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
        if run == 1:
            first = flags_of(build)
        else:
            second = flags_of(build)
    assert any(k.endswith("fanhub_core.dir/flags.make") for k in first), sorted(first)
    assert any("mit-krb5" in v or "isystem" in v for v in first.values()), \
        "no pkg-config include flag in the tree: the check would see nothing"
    changed = sorted(k for k in first if first[k] != second.get(k))
    assert not changed and first.keys() == second.keys(), \
        "flags changed by the second configure: %s\nfirst: %s\nsecond: %s" % (
            changed, first.get(changed[0]) if changed else "", second.get(changed[0]) if changed else "")
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_nothing_refers_outside_the_repository, test_scripts_help_does_nothing_else,
             test_reconfiguring_changes_no_flag])
