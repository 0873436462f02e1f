"""The shipped plugins build against an installed SDK alone.

Only the SDK component of this build is installed (`cmake --install BUILD
--component sdk --prefix TMP`: the headers, the .pc files, the CMake
package, the fake host's libfanhub-testing.a; no hub, no hub/ sources), then consumers/ is configured as a
project of its own (`cmake -S consumers -DCMAKE_PREFIX_PATH=TMP`), built
and installed into the prefix's plugin directory. The build tree's hub
then lists those plugins with `fanhub plugins`, checks a configuration
that names them, and runs the standalone-built log plugin on real
messages.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))
SHIPPED = ("amqp", "exec", "log", "null", "python", "relay", "store", "worker")


class Setup:
    """Done once: install the SDK, build consumers/ against it."""
    done = None

    @classmethod
    def get(cls):
        if cls.done is None:
            cls.done = cls()
            cls.done.prepare()
        return cls.done

    def __init__(self):
        self.wd = fh.Workdir()
        self.prefix = self.wd.file("sdk")
        # Nothing of the caller's set-up may lead the build elsewhere.
        self.env = dict(os.environ)
        for name in ("FANHUB_PLUGIN_DIR", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH",
                     "CPATH", "C_INCLUDE_PATH"):
            self.env.pop(name, None)

    def sh(self, args):
        proc = subprocess.run(args, env=self.env, capture_output=True, timeout=fh.DEADLINE)
        out = proc.stdout.decode(errors="replace")
        err = proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, "%s failed (%d):\n%s\n%s" % (
            " ".join(args), proc.returncode, out, err)
        return out

    def prepare(self):
        self.sh(["cmake", "--install", BUILD_DIR, "--component", "sdk",
                 "--prefix", self.prefix])
        installed = sorted(os.path.relpath(os.path.join(d, f), self.prefix)
                           for d, _, files in os.walk(self.prefix) for f in files)
        self.installed = installed
        build = self.wd.file("consumers-build")
        out = self.sh(["cmake", "-S", os.path.join(fh.SOURCE_DIR, "consumers"), "-B", build,
                       "-DCMAKE_PREFIX_PATH=" + self.prefix, "-DCMAKE_BUILD_TYPE=Release"])
        self.configure_out = out
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
        self.fanhub_dir = re.search(r"^fanhub_DIR:[A-Z]+=(.*)$", cache, re.M).group(1)
        self.sh(["cmake", "--build", build, "-j", "2"])
        self.sh(["cmake", "--install", build])
        self.build = build
        libdir = os.path.dirname(os.path.dirname(self.fanhub_dir))  # PREFIX/LIBDIR
        self.plugin_dir = os.path.join(libdir, "fanhub", "plugins")


def test_only_the_sdk_is_installed():
    s = Setup.get()
    for path in s.installed:
        assert path.startswith(("include/fanhub/", "lib")), s.installed
        assert not path.startswith("bin/"), s.installed
    headers = [p for p in s.installed if p.startswith("include/")]
    assert headers == ["include/fanhub/consumer.h", "include/fanhub/sdk.h",
                       "include/fanhub/sdk_curve.h", "include/fanhub/testing.h"], headers
    # The one library: the fake host for plugins' tests (no plugin links it).
    libs = [p for p in s.installed if re.search(r"\.(a|so)(\.|$)", p)]
    assert libs == ["lib/libfanhub-testing.a"], libs
    assert any(p.endswith("cmake/fanhub/fanhubPlugin.cmake") for p in s.installed), s.installed
    assert os.path.realpath(s.fanhub_dir).startswith(os.path.realpath(s.prefix)), s.fanhub_dir


def test_the_build_saw_nothing_of_the_hub():
    s = Setup.get()
    hub_dir = os.path.realpath(os.path.join(fh.SOURCE_DIR, "hub"))
    for d, _, files in os.walk(s.build):
        for f in files:
            if f in ("flags.make", "includes_C.rsp"):
                with open(os.path.join(d, f)) as fp:
                    text = fp.read()
                assert hub_dir not in text and "/hub " not in text, (d, text)
            if f == "build.make":
                with open(os.path.join(d, f)) as fp:
                    text = fp.read()
                assert hub_dir + "/" not in text, (d, "compiles a file of hub/")


def test_the_hub_lists_the_standalone_plugins():
    s = Setup.get()
    status, out, err = fh.run(["plugins", "--plugin-dir", s.plugin_dir, "--json"])
    assert status == 0, out + err
    listing = json.loads(out)
    by_name = {p["name"]: p for p in listing["plugins"]}
    assert sorted(by_name) == sorted(SHIPPED), listing
    for name, p in by_name.items():
        assert p["loaded"] and p["abi"] == listing["hub_abi"], p
        assert os.path.realpath(p["path"]) == os.path.realpath(
            os.path.join(s.plugin_dir, name + ".so")), p
    assert by_name["null"]["thread_safe"] is True


def test_the_hub_checks_and_runs_them():
    s = Setup.get()
    wd = fh.Workdir()
    pub = fh.Publisher()
    out_path = wd.file("out.jsonl")
    config = ("bus:\n  connect: %s\nconsumers:\n"
              "  - name: log\n    plugin: %s/log.so\n    options: {path: %s, flush_ms: 10}\n"
              "  - name: nothing\n    plugin: %s/null.so\n"
              "  - name: relay\n    plugin: %s/relay.so\n    options: {bind: tcp://127.0.0.1:%d}\n"
              "  - name: exec\n    plugin: %s/exec.so\n    options: {command: [/bin/true]}\n"
              "  - name: store\n    plugin: %s/store.so\n    options: {sqlite: %s}\n"
              % (pub.endpoint, s.plugin_dir, json.dumps(out_path), s.plugin_dir, s.plugin_dir,
                 fh.free_port(), s.plugin_dir, s.plugin_dir, json.dumps(wd.file("db.sqlite"))))
    path = wd.write("check.yaml", config)
    status, out, err = fh.run(["check", "-c", path])
    assert status == 0, out + err
    for name, plugin in (("log", "log"), ("nothing", "null"), ("relay", "relay"),
                         ("exec", "exec"), ("store", "store")):
        assert "  %s: %s/%s.so\n" % (name, s.plugin_dir, plugin) in out, out
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(20):
            pub.send("org.fanhub.sdk.%d" % i, '{"i":%d}' % i)
        fh.wait_for(lambda: os.path.exists(out_path) and fh.count_lines(out_path) >= 20,
                    "the standalone log plugin to write 20 lines", hub=hub)
        assert hub.stop() == 0, hub.log()
        lines = fh.read_jsonl(out_path)
        assert [l["topic"] for l in lines] == ["org.fanhub.sdk.%d" % i for i in range(20)]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()
    s.wd.cleanup()


if __name__ == "__main__":
    fh.main([test_only_the_sdk_is_installed, test_the_build_saw_nothing_of_the_hub,
             test_the_hub_lists_the_standalone_plugins, test_the_hub_checks_and_runs_them])
