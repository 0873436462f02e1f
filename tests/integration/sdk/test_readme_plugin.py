"""The plugin guide the README points to (docs/writing-a-plugin.md; "the
README" below), followed as written: install fanhub from the
build directory of this test run into a temporary prefix, build hello.c
outside the tree with the README's own commands, check it and run it
against a pyzmq publisher, and compare what it logs with what the README
shows; then build the guide's test_hello.c against the installed fake host
(<fanhub/testing.h>, libfanhub-testing.a), with cc and with CMake
(find_package(fanhub), fanhub::testing), and run it.

The README marks what is taken from it with a line
`<!-- readme-plugin: NAME -->` right before a fenced block. Only two things
are substituted: the build directory (the README says build/release) and
the publisher's endpoint (the README's YAML says tcp://127.0.0.1:9940; the
test binds a free port); and in a sanitizer build, the compiler of the
test program (sanitized_cc). $HOME is a temporary directory, so "$HOME/.local"
is the temporary prefix."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

README = os.path.join(fh.SOURCE_DIR, "docs", "writing-a-plugin.md")
README_BUILD_DIR = "build/release"
README_ENDPOINT = "tcp://127.0.0.1:9940"
BLOCKS = ("hello.c", "hello.yaml", "install", "build", "check", "check-output", "run",
          "output", "refused", "test_hello.c", "test-build", "test-output", "test-cmake")


def readme_blocks():
    with open(README) as f:
        text = f.read()
    found = {}
    for m in re.finditer(r"^<!-- readme-plugin: (\S+) -->\n```[a-z]*\n(.*?)^```$", text,
                         re.S | re.M):
        assert m.group(1) not in found, "docs/writing-a-plugin.md: block %r marked twice" % m.group(1)
        found[m.group(1)] = m.group(2)
    missing = [name for name in BLOCKS if name not in found]
    assert not missing, "docs/writing-a-plugin.md: no block marked readme-plugin: %s" % ", ".join(missing)
    return found


def commands(block):
    """The command lines of a sh block, without comments."""
    lines = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(words)
    return lines


class Setup:
    """Done once: the install, the plugin build and the check, as the README
    says. Later tests use the installed hub and the built plugin."""
    done = None

    def __init__(self):
        self.blocks = readme_blocks()
        self.wd = fh.Workdir()
        self.home = self.wd.file("home")
        self.prefix = os.path.join(self.home, ".local")
        self.plugin_dir = self.wd.file("hello")
        os.makedirs(self.home)
        os.makedirs(self.plugin_dir)
        self.fanhub = os.path.join(self.prefix, "bin", "fanhub")
        self.build_dir = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))
        self.env = dict(os.environ, HOME=self.home, RUNTIME_DIRECTORY=self.wd.path)
        self.env.pop("FANHUB_PLUGIN_DIR", None)
        self.yaml = self.blocks["hello.yaml"]
        assert README_ENDPOINT in self.yaml, self.yaml
        for name in ("hello.c", "test_hello.c"):
            with open(os.path.join(self.plugin_dir, name), "w") as f:
                f.write(self.blocks[name])
        self.write_yaml(self.yaml)

    error = None

    @classmethod
    def get(cls):
        if cls.done is None:
            cls.done = cls()
            try:
                cls.done.install_build_check()
            except BaseException as e:
                cls.done.error = e
                raise
        if cls.done.error is not None:
            raise AssertionError("the README's set-up failed: %s" % cls.done.error)
        return cls.done

    def write_yaml(self, text):
        with open(os.path.join(self.plugin_dir, "hello.yaml"), "w") as f:
            f.write(text)

    def install_build_check(self):
        cache = os.path.join(self.build_dir, "CMakeCache.txt")
        assert os.path.exists(cache), "FANHUB_BIN %s is not in a build directory" % fh.BIN
        with open(cache) as f:
            libdir = re.search(r"^CMAKE_INSTALL_LIBDIR:PATH=(.*)$", f.read(), re.M).group(1)
        # The README's PKG_CONFIG_PATH is $HOME/.local/lib/pkgconfig.
        assert libdir == "lib", ("%s has CMAKE_INSTALL_LIBDIR=%s; the README's commands "
                                 "expect lib" % (self.build_dir, libdir))
        install = self.blocks["install"]
        assert README_BUILD_DIR in install, install
        install = install.replace(README_BUILD_DIR, shlex.quote(self.build_dir))
        script = "\n".join([
            "set -euo pipefail",
            "cd %s" % shlex.quote(fh.SOURCE_DIR),
            install,
            "cd %s" % shlex.quote(self.plugin_dir),
            self.blocks["build"],
            "echo '--- which fanhub:' \"$(command -v fanhub)\"",
            "echo '--- check:'",
            self.blocks["check"],
        ])
        proc = subprocess.run(["bash", "-c", script], env=self.env, capture_output=True,
                              timeout=fh.DEADLINE)
        out = proc.stdout.decode(errors="replace")
        err = proc.stderr.decode(errors="replace")
        fh.check_sanitizers(err, "README commands")
        assert proc.returncode == 0, "README commands failed (%d):\n%s\n%s" % (
            proc.returncode, out, err)
        which = re.search(r"^--- which fanhub: (.*)$", out, re.M).group(1)
        assert os.path.realpath(which) == os.path.realpath(self.fanhub), which
        check_out = out.split("--- check:\n", 1)[1]
        assert check_out == self.blocks["check-output"], \
            "fanhub check printed:\n%s\nthe README shows:\n%s" % (
                check_out, self.blocks["check-output"])


class InstalledHub:
    """The installed `fanhub run ARGS`, started in the plugin's directory,
    its stderr in a file; proc and log() as fanhublib's waits expect."""

    def __init__(self, setup, args):
        self.stderr_path = setup.wd.file("hub.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([setup.fanhub] + list(args), cwd=setup.plugin_dir,
                                         env=setup.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)

    def log(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_install_has_what_the_readme_lists():
    s = Setup.get()
    for path in ("bin/fanhub", "lib/fanhub/plugins/log.so", "lib/fanhub/plugins/null.so",
                 "include/fanhub/consumer.h", "lib/pkgconfig/fanhub-consumer.pc",
                 "include/fanhub/testing.h", "lib/libfanhub-testing.a",
                 "lib/pkgconfig/fanhub-testing.pc"):
        assert os.path.exists(os.path.join(s.prefix, path)), path
    assert os.path.exists(os.path.join(s.plugin_dir, "hello.so"))


def test_installed_hub_finds_its_plugins():
    # No --plugin-dir, no FANHUB_PLUGIN_DIR: ../lib/fanhub/plugins beside
    # the installed binary, not the build tree's.
    s = Setup.get()
    proc = subprocess.run([s.fanhub, "check"], env=s.env, capture_output=True,
                          timeout=fh.DEADLINE)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out + proc.stderr.decode(errors="replace")
    path = re.search(r"^  tail: (.*)$", out, re.M).group(1)
    assert os.path.realpath(path) == os.path.realpath(
        os.path.join(s.prefix, "lib/fanhub/plugins/log.so")), out


def test_plugin_counts_as_the_readme_shows():
    s = Setup.get()
    run = commands(s.blocks["run"])
    hub_words = run[0]
    assert hub_words[:2] == ["fanhub", "run"] and hub_words[-1] == "&", run[0]
    sends = []
    for words in run[1:]:
        if words[:2] == ["fanhub", "pub"]:
            m = re.fullmatch(r"fanhub pub -n (\d+) -t (\S+)", " ".join(words))
            assert m, "cannot read %r" % " ".join(words)
            sends.append((int(m.group(1)), m.group(2)))
    assert run[-1][0] == "kill", run[-1]  # `kill %1`: SIGTERM
    expected = s.blocks["output"].splitlines()

    pub = fh.Publisher()
    s.write_yaml(s.yaml.replace(README_ENDPOINT, pub.endpoint))
    hub = InstalledHub(s, hub_words[1:-1])
    try:
        pub.wait_subscribed(hub=hub)
        seq = 0
        for count, topic in sends:
            for _ in range(count):
                seq += 1
                pub.send(topic, '{"seq":%d}' % seq)
        # The last count before the end is logged once all were consumed.
        last = [line for line in expected if "so far" in line][-1]
        fh.wait_for(lambda: last in hub.log(), "the plugin's line %r" % last, hub=hub)
        hub.proc.send_signal(signal.SIGTERM)
        status = hub.proc.wait(timeout=fh.DEADLINE)
        text = hub.log()
        fh.check_sanitizers(text, "fanhub run")
        assert status == 0, text
        found = [line for line in text.splitlines() if line in expected]
        assert found == expected, "the README shows:\n%s\nthe hub logged:\n%s" % (
            "\n".join(expected), text)
        assert "consumer 'hello': enqueued %d, completed %d, failed 0, dropped 0" % (
            seq, seq) in text, text
    finally:
        hub.kill()
        pub.close()
        s.write_yaml(s.yaml)


def test_bad_option_is_refused_as_the_readme_shows():
    s = Setup.get()
    assert "every: 1000" in s.yaml, s.yaml
    s.write_yaml(s.yaml.replace("every: 1000", "every: lots"))
    try:
        proc = subprocess.run([s.fanhub, "check", "-c", "hello.yaml"], cwd=s.plugin_dir,
                              env=s.env, capture_output=True, timeout=fh.DEADLINE)
        err = proc.stderr.decode(errors="replace")
        assert proc.returncode == 2, err
        assert err == s.blocks["refused"], \
            "fanhub check said:\n%s\nthe README shows:\n%s" % (err, s.blocks["refused"])
        why = s.blocks["refused"].split("refused its options: ", 1)[1].strip()
        proc = subprocess.run([s.fanhub, "run", "-c", "hello.yaml"], cwd=s.plugin_dir,
                              env=s.env, capture_output=True, timeout=fh.DEADLINE)
        err = proc.stderr.decode(errors="replace")
        fh.check_sanitizers(err, "fanhub run")
        assert proc.returncode == 2 and why in err, err
    finally:
        s.write_yaml(s.yaml)


def sanitized_cc(s):
    """"cc", or in a sanitizer tree its compiler with the same -fsanitize:
    the installed libfanhub-testing.a is instrumented and needs the
    sanitizer's runtime of the compiler that built it."""
    flags = {"address": "-fsanitize=address,undefined", "thread": "-fsanitize=thread"}
    sanitize = os.environ.get("FANHUB_SANITIZE", "")
    if not sanitize:
        return "cc"
    with open(os.path.join(s.build_dir, "CMakeCache.txt")) as f:
        compiler = re.search(r"^CMAKE_C_COMPILER:[A-Z]+=(.*)$", f.read(), re.M).group(1)
    return "%s %s" % (shlex.quote(compiler), flags[sanitize])


def test_plugin_test_passes_as_the_readme_shows():
    # Only the installed files: the compiler's search path is the one
    # pkg-config gives for the temporary prefix, and the source tree is
    # not on it.
    s = Setup.get()
    block = s.blocks["test-build"]
    assert "fanhub-testing" in block and "./test_hello" in block, block
    assert block.startswith("cc "), block
    block = sanitized_cc(s) + block[2:]
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=s.plugin_dir,
                          env=s.env, capture_output=True, timeout=fh.DEADLINE)
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, "test_hello")
    assert proc.returncode == 0, "the guide's test failed (%d):\n%s\n%s" % (
        proc.returncode, out, err)
    assert out == s.blocks["test-output"], "test_hello printed:\n%s\nthe guide shows:\n%s" % (
        out, s.blocks["test-output"])
    # A broken plugin fails it: the same test against a hello.c that
    # counts nothing.
    broken = s.blocks["hello.c"].replace("self->total++;", "")
    assert broken != s.blocks["hello.c"]
    with open(os.path.join(s.plugin_dir, "hello_broken.c"), "w") as f:
        f.write(broken)
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n"
                           + block.replace(" hello.c ", " hello_broken.c ")],
                          cwd=s.plugin_dir, env=s.env, capture_output=True, timeout=fh.DEADLINE)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode != 0 and "test_hello.c:" in err, err


def test_plugin_test_builds_with_cmake_as_the_readme_shows():
    # find_package(fanhub) from the temporary prefix, fanhub::testing.
    s = Setup.get()
    src = s.wd.file("hello-cmake")
    os.makedirs(src)
    for name, block in (("hello.c", "hello.c"), ("test_hello.c", "test_hello.c"),
                        ("CMakeLists.txt", "test-cmake")):
        with open(os.path.join(src, name), "w") as f:
            f.write(s.blocks[block])
    build = os.path.join(src, "build")
    cc = shlex.split(sanitized_cc(s))
    configure = ["cmake", "-S", src, "-B", build, "-DCMAKE_PREFIX_PATH=" + s.prefix,
                 "-DCMAKE_C_COMPILER=" + shutil.which(cc[0])]
    if len(cc) > 1:
        configure.append("-DCMAKE_C_FLAGS=" + " ".join(cc[1:]))
    for args in (configure, ["cmake", "--build", build],
                 ["ctest", "--test-dir", build, "--output-on-failure"]):
        proc = subprocess.run(args, env=s.env, capture_output=True, timeout=fh.DEADLINE)
        out = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, "%s:\n%s" % (" ".join(args), out)
    fh.check_sanitizers(out, "ctest test_hello")
    assert "100% tests passed, 0 tests failed out of 1" in out, out
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        found = re.search(r"^fanhub_DIR:PATH=(.*)$", f.read(), re.M).group(1)
    assert os.path.realpath(found).startswith(os.path.realpath(s.prefix) + os.sep), found


if __name__ == "__main__":
    fh.main([
        test_install_has_what_the_readme_lists,
        test_installed_hub_finds_its_plugins,
        test_plugin_counts_as_the_readme_shows,
        test_bad_option_is_refused_as_the_readme_shows,
        test_plugin_test_passes_as_the_readme_shows,
        test_plugin_test_builds_with_cmake_as_the_readme_shows,
    ], shared=lambda: Setup.done and Setup.done.wd)
