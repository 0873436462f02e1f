#!/usr/bin/python3
"""The RPM spec (issue 25), on this Debian machine: `rpmlint` accepts
packaging/fanhub.spec (0 errors, 0 warnings; its filters in
packaging/fanhub.rpmlintrc say why), and `rpmbuild --nodeps -bb` builds it
from a clean clone (scripts/package --rpm-only, with packaging/fedora-macros
for the Fedora macros Debian's rpm lacks). The RPMs hold what the Debian
package holds, with Fedora's paths: the units naming /usr/bin/fanhub and
/etc/fanhub/fanhub.yaml, sysusers.d and tmpfiles.d files, the production
configuration and the logrotate file as %config(noreplace), the plugins in
/usr/lib64; the scriptlets create the user and handle the unit. Nothing
is installed. Exit status 0 passed, 1 failed, 77 skipped (a tool missing;
under CI=true that fails). About a minute (the build).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
DEADLINE = 900


def sh(args, **kw):
    proc = subprocess.run(args, capture_output=True, timeout=DEADLINE, **kw)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, "%s: status %d\n%s\n%s" % (" ".join(args), proc.returncode,
                                                              out, err)
    return out, err


def test(work):
    print("== rpmlint packaging/fanhub.spec", flush=True)
    out, _ = sh(["rpmlint", "-r", os.path.join(TOP, "packaging/fanhub.rpmlintrc"),
                 os.path.join(TOP, "packaging/fanhub.spec")])
    assert re.search(r"\b0 errors, 0 warnings\b", out), out

    print("== rpmbuild --nodeps -bb from a clean clone", flush=True)
    _, err = sh([os.path.join(TOP, "scripts/package"), "--rpm-only", "--out", work])
    rpms = {re.sub(r"-[0-9].*", "", os.path.basename(p)): p
            for p in glob.glob(os.path.join(work, "rpm", "*.rpm"))}
    assert set(rpms) == {"fanhub", "fanhub-devel"}, rpms

    files, _ = sh(["rpm", "-qlp", rpms["fanhub"]])
    files = set(files.split())
    for path in ("/usr/bin/fanhub", "/usr/lib64/fanhub/plugins/log.so",
                 "/usr/lib/systemd/system/fanhub.service",
                 "/usr/lib/systemd/system/fanhub@.service", "/usr/lib/sysusers.d/fanhub.conf",
                 "/usr/lib/tmpfiles.d/fanhub.conf", "/etc/fanhub/conf.d",
                 "/usr/share/fanhub/collectd/fanhub-exec.conf", "/usr/share/doc/fanhub/README.md",
                 "/usr/share/fanhub/systemd/jit-workers.conf",
                 "/var/lib/fanhub", "/var/log/fanhub"):
        assert path in files, path
    config, _ = sh(["rpm", "-qcp", rpms["fanhub"]])
    assert set(config.split()) == {"/etc/fanhub/fanhub.yaml", "/etc/logrotate.d/fanhub"}, config
    devel, _ = sh(["rpm", "-qlp", rpms["fanhub-devel"]])
    for path in ("/usr/include/fanhub/consumer.h", "/usr/lib64/pkgconfig/fanhub-consumer.pc",
                 "/usr/lib64/cmake/fanhub/fanhubConfig.cmake", "/usr/include/fanhub/testing.h",
                 "/usr/lib64/libfanhub-testing.a", "/usr/lib64/pkgconfig/fanhub-testing.pc"):
        assert path in devel.split(), path
    scripts, _ = sh(["rpm", "-qp", "--scripts", rpms["fanhub"]])
    assert re.search(r"^u fanhub ", scripts, re.M) and "systemd-sysusers" in scripts, scripts
    assert "preset fanhub.service" in scripts, scripts
    # Weak dependencies: the python plugin's runner and the Perl example worker.
    recommends, _ = sh(["rpm", "-qp", "--recommends", rpms["fanhub"]])
    assert set(recommends.split()) >= {"python3", "perl-interpreter"}, recommends

    # The unit as installed, from the package's payload.
    root = os.path.join(work, "root")
    os.makedirs(root)
    cpio = subprocess.run("rpm2cpio '%s' | cpio -idm --quiet" % rpms["fanhub"], shell=True,
                          cwd=root, capture_output=True, timeout=DEADLINE)
    assert cpio.returncode == 0, cpio.stderr.decode()
    with open(os.path.join(root, "usr/lib/systemd/system/fanhub.service")) as f:
        unit = f.read()
    assert re.search(r"^ExecStart=/usr/bin/fanhub run -c /etc/fanhub/fanhub\.yaml$", unit, re.M)
    with open(os.path.join(root, "usr/share/fanhub/collectd/fanhub-exec.conf")) as f:
        assert '"/usr/bin/fanhub" "collectd" "-c" "/etc/fanhub/fanhub.yaml"' in f.read()


def main():
    missing = [t for t in ("rpmbuild", "rpmlint", "rpm2cpio", "cpio", "git", "dpkg-parsechangelog")
               if not shutil.which(t)]
    if missing:
        print(("FAIL (CI=true, so nothing may be skipped): " if IN_CI else "SKIP: ")
              + "missing %s: scripts/deps installs them" % ", ".join(missing))
        sys.exit(1 if IN_CI else 77)
    work = tempfile.mkdtemp(prefix="fanhub-rpm-test-")
    try:
        test(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("passed", flush=True)


if __name__ == "__main__":
    main()
