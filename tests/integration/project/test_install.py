"""What `cmake --install` writes with installed paths (issue 25): installed
from this test run's build directory twice, with `--prefix TMP` (as the
README's `--prefix "$HOME/.local"`) and with `--prefix /usr` into a
DESTDIR (as the packages do), the systemd units, the collectd snippets and
the production configuration name the binary and the configuration of the
prefix installed to, so that `systemd-analyze verify` passes on the
installed units; the sysusers.d, tmpfiles.d and logrotate files and
SYSCONFDIR/fanhub/conf.d are there; every relative link of the installed
docs resolves and the pictures are installed; a second install keeps an
edited production configuration."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))
DOCLINKS = os.path.join(fh.SOURCE_DIR, "tests", "package", "doclinks.py")
WD = fh.Workdir()


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    proc = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix], env=env,
                          capture_output=True, timeout=fh.DEADLINE)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    return (destdir or "") + prefix


def read(path):
    with open(path) as f:
        return f.read()


def exec_lines(unit):
    return re.findall(r"^(Exec\w+)=(.*)$", unit, re.M)


def check_paths(root, prefix, sysconfdir):
    """The installed files under root (DESTDIR + prefix, or the prefix)
    name prefix/bin/fanhub and sysconfdir/fanhub/."""
    unitdir = os.path.join(root, "lib/systemd/system")
    fanhub = prefix + "/bin/fanhub"
    unit = read(os.path.join(unitdir, "fanhub.service"))
    assert ("ExecStart", "%s run -c %s/fanhub/fanhub.yaml" % (fanhub, sysconfdir)) \
        in exec_lines(unit), exec_lines(unit)
    assert ("ExecReload", "%s reload -c %s/fanhub/fanhub.yaml" % (fanhub, sysconfdir)) \
        in exec_lines(unit), exec_lines(unit)
    template = read(os.path.join(unitdir, "fanhub@.service"))
    assert ("ExecStart", "%s run -c %s/fanhub/%%i.yaml" % (fanhub, sysconfdir)) \
        in exec_lines(template), exec_lines(template)
    assert re.search(r"^SyslogIdentifier=fanhub-%i$", template, re.M), template
    assert re.search(r"^StateDirectory=fanhub/%i$", template, re.M), template
    # No path of another prefix is left in them.
    for text in (unit, template):
        for line in exec_lines(text):
            assert "/usr/local" not in line[1] or prefix.startswith("/usr/local"), line
    # collectd runs the same binary with the same file the unit does.
    exec_conf = read(os.path.join(root, "share/fanhub/collectd/fanhub-exec.conf"))
    assert re.search(r'^\s*Exec "fanhub:fanhub" "%s" "collectd" "-c" "%s/fanhub/fanhub.yaml"$'
                     % (re.escape(fanhub), re.escape(sysconfdir)), exec_conf, re.M), exec_conf
    # The production configuration: nothing on stdout, the socket written out.
    etc = (root[:-len(prefix)] if root != prefix else "") + sysconfdir
    production = read(os.path.join(etc, "fanhub/fanhub.yaml"))
    assert 'path: "-"' not in production and "path: -" not in production
    assert re.search(r"^control: ipc:///run/fanhub/fanhub\.sock$", production, re.M)
    assert os.path.isdir(os.path.join(etc, "fanhub/conf.d"))
    assert "/var/log/fanhub/" in read(os.path.join(etc, "logrotate.d/fanhub"))
    assert re.search(r"^u fanhub ", read(os.path.join(root, "lib/sysusers.d/fanhub.conf")), re.M)
    tmpfiles = read(os.path.join(root, "lib/tmpfiles.d/fanhub.conf"))
    for d in ("/run/fanhub", "/var/lib/fanhub", "/var/log/fanhub"):
        assert re.search(r"^d %s 0750 fanhub fanhub -$" % d, tmpfiles, re.M), tmpfiles
    return etc


def test_prefix_install_names_its_own_paths():
    prefix = WD.file("prefix")
    install(prefix)
    check_paths(prefix, prefix, prefix + "/etc")
    analyze = fh.require_tool(shutil.which("systemd-analyze"), "systemd-analyze", "systemd")
    # verify checks that ExecStart's binary exists and that the man pages of
    # Documentation= are found: both are the installed ones.
    units = [os.path.join(prefix, "lib/systemd/system", u)
             for u in ("fanhub.service", "fanhub@.service")]
    proc = subprocess.run([analyze, "verify"] + units, capture_output=True, timeout=fh.DEADLINE,
                          env=dict(os.environ, MANPATH=os.path.join(prefix, "share/man")))
    assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode()


def test_usr_prefix_uses_etc():
    destdir = WD.file("destdir")
    root = install("/usr", destdir)
    etc = check_paths(root, "/usr", "/etc")
    assert etc == destdir + "/etc", etc


def test_installed_docs_links_resolve():
    prefix = WD.file("prefix")
    docdir = os.path.join(prefix, "share/doc/fanhub")
    proc = subprocess.run([sys.executable, DOCLINKS, docdir, "--min-files", "15"],
                          capture_output=True, timeout=fh.DEADLINE)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    for picture in ("performance-throughput.png", "performance-latency.png"):
        assert os.path.exists(os.path.join(docdir, "docs", picture)), picture
        assert "](%s)" % picture in read(os.path.join(docdir, "docs/performance.md"))
    # A link into the source tree became its text; one to the reference
    # configuration points at the installed copy.
    readme = read(os.path.join(docdir, "README.md"))
    assert "](../../fanhub/fanhub.yaml)" in readme
    assert "](hub/" not in readme and "](include/" not in readme


def test_reinstall_keeps_an_edited_configuration():
    prefix = WD.file("prefix")
    conf = os.path.join(prefix, "etc/fanhub/fanhub.yaml")
    with open(conf, "a") as f:
        f.write("# edited by the operator\n")
    install(prefix)
    assert read(conf).endswith("# edited by the operator\n")


if __name__ == "__main__":
    try:
        fh.main([test_prefix_install_names_its_own_paths, test_usr_prefix_uses_etc,
                 test_installed_docs_links_resolve,
                 test_reinstall_keeps_an_edited_configuration])
    finally:
        WD.cleanup()
