"""The Python runner (consumers/worker/python) type-checks with `mypy
--strict` (its settings: consumers/worker/python/pyproject.toml) and is
clean under pyflakes, as are its tests (tests/python, the upstream
stand-ins and consumers of tests/integration). A missing
tool skips (exit 77), or fails under CI=true; scripts/deps installs both
(Debian's python3-mypy and python3-pyflakes). ctest runs it as
lint.python_worker."""
import importlib.util
import os
import subprocess
import sys

SOURCE_DIR = os.environ.get("FANHUB_SOURCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
PACKAGE_DIR = os.path.join(SOURCE_DIR, "consumers", "worker", "python")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(tool, package):
    reason = "%s is missing: scripts/deps installs it (Debian package %s)" % (tool, package)
    if IN_CI:
        print("FAIL (CI=true, so nothing may be skipped): " + reason)
        sys.exit(1)
    print("SKIP: " + reason)
    sys.exit(77)


def run(args, cwd):
    proc = subprocess.run([sys.executable, "-m"] + args, cwd=cwd, capture_output=True, text=True)
    print("$ %s\n%s%s" % (" ".join(args), proc.stdout, proc.stderr), end="")
    return proc.returncode == 0


def main():
    for module, package in (("mypy", "python3-mypy"), ("pyflakes", "python3-pyflakes")):
        if importlib.util.find_spec(module) is None:
            missing(module, package)
    ok = run(["mypy", "--config-file", "pyproject.toml", "--cache-dir", os.devnull], PACKAGE_DIR)
    ok = run(["pyflakes", "fanhub_worker"], PACKAGE_DIR) and ok
    ok = run(["pyflakes", "tests/python", "tests/integration/upstream",
              "tests/integration/workers", "tests/integration/plugins/test_worker_upstream.py",
              "tests/integration/plugins/test_porting.py"],
             SOURCE_DIR) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
