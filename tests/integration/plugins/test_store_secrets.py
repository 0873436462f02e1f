"""store: the PostgreSQL password comes from a file (password_file, mode
0600 or refused) or from the environment (password_env), never from the
YAML, and never shows in the hub's log or answers. The server of
test_store, switched to password (SCRAM) authentication over TCP; the
test reads the table back over the Unix socket, which stays trusted."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import test_store as ts

PASSWORD = "hunter2-fanhub-secret"


def require_password(pg):
    pg.psql("ALTER USER postgres PASSWORD '%s'" % PASSWORD)
    hba = os.path.join(pg.data, "pg_hba.conf")
    with open(hba) as f:
        text = f.read()
    text = re.sub(r"(?m)^(host\s.*\s)trust\s*$", r"\1scram-sha-256", text)
    with open(hba, "w") as f:
        f.write(text)
    pg.psql("SELECT pg_reload_conf()")

    def refused():
        r = subprocess.run([os.path.join(pg.bindir, "psql"), "-X", "-w", "-d", pg.conninfo(),
                            "-c", "SELECT 1"], capture_output=True,
                           env={k: v for k, v in os.environ.items() if k != "PGPASSWORD"})
        return r.returncode != 0
    fh.wait_for(refused, "PostgreSQL to ask for a password")


def count(pg):
    r = subprocess.run([os.path.join(pg.bindir, "psql"), "-X", "-q", "-A", "-t", "-d",
                        "host=%s port=%d user=postgres dbname=postgres" % (pg.sock, pg.port),
                        "-c", "SELECT count(*) FROM messages"], capture_output=True)
    return int(r.stdout) if r.returncode == 0 and r.stdout.strip() else 0


def archive(wd, pg, options, first, n, env=None, name="hub"):
    """Messages first..first+n-1 (their msg_ids differ from earlier runs's:
    the store skips a msg_id it has)."""
    pub = fh.Publisher()
    options = dict({"postgres": pg.conninfo(), "batch": 1}, **options)
    hub = fh.Hub(wd, ts.config(pub, options), name=name, env=env)
    try:
        pub.wait_subscribed(hub=hub)
        before = count(pg)
        for i in range(first, first + n):
            pub.send(ts.topic_of(i), ts.body_of(i))
        fh.wait_for(lambda: count(pg) >= before + n, "%d more rows" % n, hub=hub)
        assert hub.stop() == 0, hub.log()
        assert PASSWORD not in hub.log()
        with open(hub.config) as f:
            assert PASSWORD not in f.read()
    finally:
        hub.kill()
        pub.close()


@ts.pg_test
def test_password_from_a_file_or_the_environment(wd, pg):
    require_password(pg)
    secret = wd.write("pgpass", PASSWORD + "\n")
    os.chmod(secret, 0o600)
    archive(wd, pg, {"password_file": secret}, 0, 100, name="file")
    env = {"FANHUB_TEST_PG_PASSWORD": PASSWORD}
    archive(wd, pg, {"password_env": "FANHUB_TEST_PG_PASSWORD"}, 100, 100, env=env,
            name="env")
    assert count(pg) == 200

    # A password file others can read is refused, and says so without the
    # password; so is an unset variable.
    os.chmod(secret, 0o644)
    pub = fh.Publisher()
    for options, expected in (({"password_file": secret},
                               "options.password_file: %s: other users may read or change it; "
                               "refusing it" % secret),
                              ({"password_env": "FANHUB_TEST_PG_UNSET"},
                               "options.password_env: the environment variable "
                               "FANHUB_TEST_PG_UNSET is not set, or empty"),
                              ({"sqlite": wd.file("a.db"), "password_env": "HOME"}, None)):
        if "sqlite" in options:
            cfg = wd.write("bad.yaml", ts.config(pub, options))
            expected = "options.password_env: a password is for postgres only"
        else:
            cfg = wd.write("bad.yaml", ts.config(pub, dict({"postgres": pg.conninfo()}, **options)))
        status, out, err = fh.run(["run", "-c", cfg])
        assert status == 2 and expected in err, err
        assert PASSWORD not in out + err
    pub.close()


if __name__ == "__main__":
    fh.main([test_password_from_a_file_or_the_environment])
