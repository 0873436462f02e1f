"""The README's "Tests" section, run as written: one cmocka case chosen by
FANHUB_CASE through ctest, and one Python case named on the command line
with nothing of the environment set (fanhublib finds the build tree)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

# The tree this test was built in stands for the README's build/release.
BUILD = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))


def readme_commands():
    with open(os.path.join(fh.SOURCE_DIR, "README.md")) as f:
        text = f.read()
    section = text.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    lines = [l for b in blocks for l in b.splitlines()]
    ctest = [l for l in lines if l.startswith("FANHUB_CASE=")]
    python = [l for l in lines if l.startswith("/usr/bin/python3 tests/integration/")]
    assert len(ctest) == 1 and len(python) == 1, lines
    return shlex.split(ctest[0]), shlex.split(python[0])


def clean_env():
    """No FANHUB_* variable, as in a fresh shell; FANHUB_BUILD_DIR only
    when this tree is not build/release."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANHUB_")}
    if os.path.realpath(BUILD) != os.path.realpath(os.path.join(fh.SOURCE_DIR, "build", "release")):
        env["FANHUB_BUILD_DIR"] = BUILD
    return env


def test_one_cmocka_case_through_ctest():
    args, _ = readme_commands()
    assign, args = args[0], args[1:]
    name, case = assign.split("=", 1)
    ctest = shutil.which("ctest")
    if not ctest:
        raise fh.Skip("ctest is missing")
    # The tree's tests through a directory of their own, so this ctest
    # writes its Testing/ there, not over the log of the ctest running it.
    wd = fh.Workdir()
    wd.write("CTestTestfile.cmake", 'subdirs("%s")\n' % BUILD)
    args = [ctest] + [wd.path if a == "build/release" else a for a in args[1:]]
    env = dict(clean_env(), **{name: case})
    out = subprocess.run(args, cwd=fh.SOURCE_DIR, env=env, capture_output=True, text=True,
                         timeout=fh.DEADLINE).stdout
    ran = re.findall(r"\[ RUN +\] (\S+)", out)
    assert ran == [case], out[-4000:]
    assert "100% tests passed" in out, out[-4000:]
    wd.cleanup()


def test_one_python_case_by_name():
    _, args = readme_commands()
    wanted = args[-1].rsplit("::", 1)[-1]
    proc = subprocess.run(args, cwd=fh.SOURCE_DIR, env=clean_env(), capture_output=True,
                          text=True, timeout=fh.DEADLINE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.findall(r"^ok +(\S+)", proc.stdout, re.M) == [wanted], proc.stdout
    assert "1 passed, 0 failed, 0 skipped" in proc.stdout, proc.stdout


def test_an_unknown_case_is_an_error():
    _, args = readme_commands()
    proc = subprocess.run(args[:-1] + ["no_such_case"], cwd=fh.SOURCE_DIR, env=clean_env(),
                          capture_output=True, text=True, timeout=fh.DEADLINE)
    assert proc.returncode == 2 and "no such case" in proc.stdout, proc.stdout


if __name__ == "__main__":
    fh.main([test_one_cmocka_case_through_ctest, test_one_python_case_by_name,
             test_an_unknown_case_is_an_error])
