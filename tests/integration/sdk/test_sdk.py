"""The plugin SDK, used as an outsider would: fanhub is installed from the
build directory of this test run (`cmake --install BUILD --prefix TMP`), the
installed tree is moved elsewhere (everything must find itself from its own
place), and a plugin is built outside the tree with nothing but the
installed files, both ways:

1. pkg-config: `cc -shared -fPIC $(pkg-config --cflags fanhub-consumer)`
   with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig;
2. CMake: a tiny project with find_package(fanhub REQUIRED) and
   CMAKE_PREFIX_PATH=PREFIX, built with fanhub_add_plugin() (its imported
   target fanhub::consumer) and installed into FANHUB_PLUGIN_DIR.

The INSTALLED fanhub then checks a configuration that uses both plugins
(one by path, one by name), runs it against a pyzmq publisher (both
plugins see every message, with their options) and stops cleanly;
`fanhub plugins` lists the shipped plugins and the CMake-built one with ABI
1.3; the man pages, the CMake package, the systemd unit and the reference
configuration are installed, and the man pages render without warnings.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))

PLUGIN_C = r"""
/* sdk_probe: logs every message with its option `tag`, counts them. */
#include <fanhub/consumer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char tag[64];
    unsigned long count;
} probe_t;

/* Not exported: built with hidden symbols, only the entry point shows. */
int sdk_probe_helper (void);
int
sdk_probe_helper (void)
{
    return 42;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
        void **state, char *err, size_t errlen)
{
    const fanhub_option_t *tag = host->option_get (options, "tag");
    const char *text = tag ? host->option_scalar (tag) : NULL;
    if (!text || !*text || strlen (text) >= 64) {
        snprintf (err, errlen, "options.tag: required, 1 to 63 characters (%s)",
                  host->option_where (tag ? tag : options));
        return -1;
    }
    probe_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    strcpy (self->tag, text);
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    probe_t *self = state;
    fanhub_bytes_t topic = self->host->msg_topic (msg);
    fanhub_bytes_t body = self->host->msg_body (msg);
    self->count++;
    self->host->log (self->ctx, FANHUB_LOG_INFO, "%s got %.*s %.*s (helper %d)", self->tag,
                     (int) topic.size, (const char *) topic.data, (int) body.size,
                     (const char *) body.data, sdk_probe_helper ());
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    probe_t *self = state;
    self->host->log (self->ctx, FANHUB_LOG_INFO, "%s saw %lu messages", self->tag,
                     self->count);
    free (self);
}

static const fanhub_consumer_desc_t s_desc = {
    FANHUB_CONSUMER_DESC_HEADER,
    .name = "sdk_probe",
    .version = "3.1",
    .init = s_init,
    .consume = s_consume,
    .fini = s_fini,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return &s_desc;
}
"""

CMAKELISTS = """cmake_minimum_required(VERSION 3.18)
project(sdk_probe C)
find_package(fanhub 0.1 REQUIRED)
message(STATUS "fanhub plugin dir: ${FANHUB_PLUGIN_DIR}")
message(STATUS "fanhub ABI: ${FANHUB_ABI_MAJOR}.${FANHUB_ABI_MINOR}")
if(NOT TARGET fanhub::consumer)
  message(FATAL_ERROR "no fanhub::consumer target")
endif()
fanhub_add_plugin(sdk_cmake probe.c INSTALL)
"""


def cache_value(name):
    with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
        m = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(name), f.read(), re.M)
    return m.group(1) if m else None


class Setup:
    """Done once: install, move, build both plugins."""
    done = None
    error = None

    @classmethod
    def get(cls):
        if cls.done is None:
            cls.done = cls()
            try:
                cls.done.prepare()
            except BaseException as e:
                cls.done.error = e
                raise
        if cls.done.error is not None:
            raise AssertionError("the SDK set-up failed: %s" % cls.done.error)
        return cls.done

    def __init__(self):
        self.wd = fh.Workdir()
        self.prefix = self.wd.file("moved-prefix")
        self.fanhub = os.path.join(self.prefix, "bin", "fanhub")
        assert os.path.exists(os.path.join(BUILD_DIR, "CMakeCache.txt")), \
            "FANHUB_BIN %s is not in a build directory" % fh.BIN
        self.libdir = cache_value("CMAKE_INSTALL_LIBDIR") or "lib"
        self.plugin_dir = os.path.join(self.prefix, self.libdir, "fanhub", "plugins")
        # Nothing of the build tree or the caller's set-up may leak in.
        self.env = dict(os.environ, RUNTIME_DIRECTORY=self.wd.path)
        for name in ("FANHUB_PLUGIN_DIR", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH",
                     "PKG_CONFIG_SYSROOT_DIR"):
            self.env.pop(name, None)

    def sh(self, args, cwd=None, env=None):
        proc = subprocess.run(args, cwd=cwd, env=env or self.env, capture_output=True,
                              timeout=fh.DEADLINE)
        out = proc.stdout.decode(errors="replace")
        err = proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, "%s failed (%d):\n%s\n%s" % (
            " ".join(args), proc.returncode, out, err)
        return out, err

    def prepare(self):
        staged = self.staged = self.wd.file("staged-prefix")
        self.sh(["cmake", "--install", BUILD_DIR, "--prefix", staged])
        os.rename(staged, self.prefix)
        src = self.wd.file("src")
        os.makedirs(src)
        with open(os.path.join(src, "probe.c"), "w") as f:
            f.write(PLUGIN_C)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(CMAKELISTS)

        # 1. pkg-config.
        env = dict(self.env, PKG_CONFIG_PATH=os.path.join(self.prefix, self.libdir, "pkgconfig"))
        cflags, _ = self.sh(["pkg-config", "--cflags", "fanhub-consumer"], env=env)
        assert cflags.startswith("-I") and os.path.normpath(cflags.strip()[2:]) == \
            os.path.join(self.prefix, "include"), "pkg-config --cflags: %r" % cflags
        self.pc_plugin = os.path.join(src, "sdk_pc.so")
        self.sh(["cc", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"]
                + cflags.split() + ["-o", self.pc_plugin, os.path.join(src, "probe.c")],
                env=env)

        # 2. CMake, installed into the plugin directory it names.
        build = os.path.join(src, "build")
        out, _ = self.sh(["cmake", "-S", src, "-B", build,
                          "-DCMAKE_PREFIX_PATH=" + self.prefix,
                          "-DCMAKE_BUILD_TYPE=Release"])
        m = re.search(r"fanhub plugin dir: (.*)", out)
        assert m and os.path.realpath(m.group(1)) == os.path.realpath(self.plugin_dir), out
        assert "fanhub ABI: 1.6" in out, out
        assert os.path.realpath(self.cache(build, "fanhub_DIR")) == os.path.realpath(
            os.path.join(self.prefix, self.libdir, "cmake", "fanhub")), "found another fanhub"
        self.sh(["cmake", "--build", build])
        self.cmake_build = os.path.join(build, "sdk_cmake.so")
        assert os.path.exists(self.cmake_build), os.listdir(build)
        self.sh(["cmake", "--install", build])
        assert os.path.exists(os.path.join(self.plugin_dir, "sdk_cmake.so"))

    @staticmethod
    def cache(build, name):
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return re.search(r"^%s:[A-Z]+=(.*)$" % name, f.read(), re.M).group(1)

    def config(self, endpoint, tag_pc="pc", tag_cmake="cmake"):
        path = self.wd.write("sdk.yaml", (
            "bus:\n  connect: %s\n"
            "control: ipc://%s\n"
            "consumers:\n"
            "  - name: by-path\n    plugin: %s\n    options: {tag: %s}\n"
            "  - name: by-name\n    plugin: sdk_cmake\n    options: {tag: %s}\n")
            % (endpoint, self.wd.file("control.sock"), self.pc_plugin, tag_pc, tag_cmake))
        return path


def test_both_builds_export_only_the_entry_point():
    s = Setup.get()
    nm = fh.require_tool(shutil.which("nm"), "nm", "binutils")
    for so in (s.pc_plugin, s.cmake_build):
        out = subprocess.run([nm, "-D", "--defined-only", so], capture_output=True,
                             timeout=fh.DEADLINE).stdout.decode()
        names = [line.split()[-1] for line in out.splitlines() if line.strip()]
        assert "fanhub_consumer_entry" in names, (so, names)
        assert "sdk_probe_helper" not in names, (so, names)
    assert not os.path.basename(s.cmake_build).startswith("lib")


def test_installed_hub_checks_and_runs_both():
    s = Setup.get()
    pub = fh.Publisher()
    config = s.config(pub.endpoint)
    proc = subprocess.run([s.fanhub, "check", "-c", config], env=s.env, capture_output=True,
                          timeout=fh.DEADLINE)
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, "fanhub check")
    assert proc.returncode == 0, out + err
    assert "  by-path: %s\n" % s.pc_plugin in out, out
    assert os.path.realpath(re.search(r"^  by-name: (.*)$", out, re.M).group(1)) == \
        os.path.realpath(os.path.join(s.plugin_dir, "sdk_cmake.so")), out

    stderr_path = s.wd.file("hub.stderr")
    with open(stderr_path, "wb") as err_file:
        hub = subprocess.Popen([s.fanhub, "run", "-c", config], env=s.env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=err_file)

    class Watched:
        """What fanhublib's waits look at: proc and log()."""
        def __init__(self):
            self.proc = hub

        def log(self):
            with open(stderr_path, errors="replace") as f:
                return f.read()

    watched = Watched()
    try:
        pub.wait_subscribed(hub=watched)
        n = 25
        for i in range(n):
            pub.send("org.fanhub.sdk.%d" % i, "body-%d" % i)
        last = "got org.fanhub.sdk.%d body-%d" % (n - 1, n - 1)
        fh.wait_for(lambda: ("pc " + last) in watched.log() and ("cmake " + last) in watched.log(),
                    "both plugins to log the last message", hub=watched)
        hub.send_signal(signal.SIGTERM)
        status = hub.wait(timeout=fh.DEADLINE)
        text = watched.log()
        fh.check_sanitizers(text, "fanhub run")
        assert status == 0, text
        for name, tag in (("by-path", "pc"), ("by-name", "cmake")):
            got = re.findall(r"consumer '%s': %s got (\S+) (\S+) \(helper 42\)" % (name, tag), text)
            assert got == [("org.fanhub.sdk.%d" % i, "body-%d" % i) for i in range(n)], text
            assert "consumer '%s': %s saw %d messages" % (name, tag, n) in text, text
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()
        pub.close()


def test_installed_hub_refuses_bad_options_with_the_place():
    s = Setup.get()
    config = s.wd.write("bad.yaml", (
        "bus:\n  connect: tcp://127.0.0.1:9\n"
        "consumers:\n  - name: by-name\n    plugin: sdk_cmake\n    options: {other: 1}\n"))
    proc = subprocess.run([s.fanhub, "check", "-c", config], env=s.env, capture_output=True,
                          timeout=fh.DEADLINE)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, err
    assert "%s:4:5: consumer 'by-name': plugin 'sdk_cmake' refused its options: " \
           "options.tag: required, 1 to 63 characters (%s:6:14)" % (config, config) in err, err


def test_installed_plugins_lists_them_with_abi():
    s = Setup.get()
    proc = subprocess.run([s.fanhub, "plugins", "--json"], env=s.env, capture_output=True,
                          timeout=fh.DEADLINE)
    err = proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, "fanhub plugins")
    assert proc.returncode == 0, err
    listing = json.loads(proc.stdout)
    assert os.path.realpath(listing["plugin_dir"]) == os.path.realpath(s.plugin_dir), listing
    assert listing["hub_abi"] == "1.6"
    by_name = {p["name"]: p for p in listing["plugins"]}
    shipped = sorted(f[:-3] for f in os.listdir(os.path.join(BUILD_DIR, s.libdir, "fanhub",
                                                             "plugins")) if f.endswith(".so"))
    for name in ("log", "null", "store", "relay", "exec"):
        source = os.path.join(fh.SOURCE_DIR, "consumers", name)
        assert name in shipped or not os.path.isdir(source), "%s was not built" % name
    assert "log" in shipped and "null" in shipped, shipped
    assert sorted(by_name) == sorted(shipped + ["sdk_cmake"]), (sorted(by_name), shipped)
    for name, p in by_name.items():
        assert p["loaded"] and p["abi"] == "1.6", p
        assert os.path.realpath(p["path"]) == os.path.realpath(
            os.path.join(s.plugin_dir, name + ".so")), p
    assert by_name["sdk_cmake"]["version"] == "3.1"
    assert by_name["sdk_cmake"]["descriptor_name"] == "sdk_probe"
    assert by_name["sdk_cmake"]["thread_safe"] is False
    assert by_name["null"]["thread_safe"] is True
    # The table says the same, one row each.
    proc = subprocess.run([s.fanhub, "plugins"], env=s.env, capture_output=True,
                          timeout=fh.DEADLINE)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    for name in by_name:
        assert re.search(r"^%s +\S+ +1\.6 +(yes|no) +/" % re.escape(name), out, re.M), out
    # A broken shared object is listed with its reason, and fails the listing.
    with open(os.path.join(s.plugin_dir, "broken.so"), "w") as f:
        f.write("not an ELF file\n")
    try:
        proc = subprocess.run([s.fanhub, "plugins"], env=s.env, capture_output=True,
                              timeout=fh.DEADLINE)
        out = proc.stdout.decode()
        assert proc.returncode == 1, out
        assert re.search(r"^broken +does not load: .*broken\.so", out, re.M), out
        assert "1 of %d plugins did not load" % (len(by_name) + 1) in proc.stderr.decode()
    finally:
        os.unlink(os.path.join(s.plugin_dir, "broken.so"))


def test_installed_files():
    s = Setup.get()
    p = s.prefix
    for path in ("share/man/man1/fanhub.1", "share/man/man5/fanhub.yaml.5",
                 os.path.join(s.libdir, "cmake/fanhub/fanhubConfig.cmake"),
                 os.path.join(s.libdir, "cmake/fanhub/fanhubConfigVersion.cmake"),
                 os.path.join(s.libdir, "cmake/fanhub/fanhubTargets.cmake"),
                 os.path.join(s.libdir, "pkgconfig/fanhub-consumer.pc"),
                 "include/fanhub/consumer.h", "lib/systemd/system/fanhub.service",
                 "share/fanhub/fanhub.yaml"):
        assert os.path.exists(os.path.join(p, path)), path
    with open(os.path.join(fh.SOURCE_DIR, "config", "fanhub.yaml"), "rb") as a, \
            open(os.path.join(p, "share/fanhub/fanhub.yaml"), "rb") as b:
        assert a.read() == b.read()
    # The unit names the binary of the prefix installed to (a unit cannot be
    # moved; test_install.py checks the installed paths in place).
    with open(os.path.join(p, "lib/systemd/system/fanhub.service")) as f:
        unit = f.read()
    bindir = s.staged + "/" + (cache_value("CMAKE_INSTALL_BINDIR") or "bin")
    assert re.search(r"^ExecStart=%s/fanhub run -c \S+/fanhub/fanhub\.yaml$"
                     % re.escape(os.path.normpath(bindir)), unit, re.M), unit
    man = fh.require_tool(shutil.which("man"), "man", "man-db")
    groff = fh.require_tool(shutil.which("groff"), "groff", "groff-base")
    for page in ("man1/fanhub.1", "man5/fanhub.yaml.5"):
        path = os.path.join(p, "share/man", page)
        if groff:
            proc = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path],
                                  capture_output=True, timeout=fh.DEADLINE)
            assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode()
        if man:
            # Found by name under the prefix, as `man fanhub` would.
            name = "fanhub" if page.startswith("man1") else "fanhub.yaml"
            section = page[3]
            proc = subprocess.run([man, "-w", section, name], capture_output=True,
                                  env=dict(s.env, MANPATH=os.path.join(p, "share/man")),
                                  timeout=fh.DEADLINE)
            assert os.path.realpath(proc.stdout.decode().strip()) == os.path.realpath(path), \
                proc.stdout.decode() + proc.stderr.decode()


if __name__ == "__main__":
    fh.main([
        test_both_builds_export_only_the_entry_point,
        test_installed_hub_checks_and_runs_both,
        test_installed_hub_refuses_bad_options_with_the_place,
        test_installed_plugins_lists_them_with_abi,
        test_installed_files,
    ], shared=lambda: Setup.done and Setup.done.wd)
