"""Plugin ABI 1.2: option tables, FAIL/RETRY reasons, and older plugins.

- `fanhub plugins --options NAME` prints a plugin's table;
- the hub reads a consumer's options against the table: typed values with
  defaults, refusals with FILE:LINE:COL, in `fanhub check` and `run`;
- a plugin's set_reason reaches the hub's log line and the dead letter
  (`fanhub dead-letter list` and `show`);
- a plugin built for ABI 1.1 (no table, completion calls) still loads,
  is checked by its own check and runs.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def plugin(name):
    return "%s/%s.so" % (fh.TEST_PLUGINS, name)


def config(pub, wd, options, name="r", extra=""):
    return ("bus:\n  connect: %s\nstate_dir: %s\nconsumers:\n"
            "  - name: %s\n    plugin: %s\n    options: %s\n%s"
            % (pub, json.dumps(wd.file("state")), name, plugin("reasoned"), options, extra))


def test_plugins_prints_the_table():
    status, out, err = fh.run(["plugins", "--options", plugin("reasoned")])
    assert status == 0, out + err
    assert out.startswith("plugin reasoned (%s), ABI 1.6\n" % plugin("reasoned")), out
    assert re.search(r"^OPTION +TYPE +DEFAULT +RANGE +DESCRIPTION$", out, re.M), out
    rows = {
        "mode": r"enum +fail +fail\|retry +what consume answers",
        "reason": r"string +\(required\) +1\.\.100 +why every message fails",
        "limit": r"size +64KiB +- +a size",
        "wait": r"duration +2s +0\.\.3600000 +a duration",
        "ratio": r"number +0\.5 +0\.\.1 +a number",
        "count": r"unsigned +3 +1\.\.10 +an unsigned integer",
        "tags": r"strings +- +- +a list of strings",
    }
    for name, row in rows.items():
        assert re.search(r"^%s +%s$" % (name, row), out, re.M), (name, out)
    # Shipped plugins have tables; one without (ABI 1.1) says so.
    status, out, err = fh.run(["plugins", "--plugin-dir", fh.SHIPPED_PLUGINS, "--options", "exec"])
    assert status == 0 and re.search(r"^timeout_ms +duration +10000 +1\.\.86400000 ", out, re.M), out
    assert re.search(r"^stdout +enum +null +null\|stderr\|inherit ", out, re.M), out
    status, out, err = fh.run(["plugins", "--options", plugin("abi11")])
    assert status == 0, out + err
    assert "(no option table: the plugin reads its options itself)" in out, out
    assert "read_past_the_descriptor" not in out, out
    # Failures: a plugin that does not load, --options with --json.
    status, out, err = fh.run(["plugins", "--options", plugin("no-such-plugin")])
    assert status == 1 and "no-such-plugin.so" in err, err
    status, out, err = fh.run(["plugins", "--json", "--options", "log"])
    assert status == 2 and "give --json or --options, not both" in err, err


def test_check_reads_typed_values_and_refuses_with_the_place():
    wd = fh.Workdir()
    # (options, the text the error points at, the message)
    cases = [
        ("{reason: x, colour: red}", "red",
         "options.colour: unknown option; reasoned takes mode, reason, limit, wait, ratio, "
         "count, offset, loud, tags, file and extra"),
        ("{mode: explode, reason: x}", "explode",
         'options.mode: expected fail or retry, got "explode"'),
        ("{reason: x, limit: 5Q}", "5Q",
         'options.limit: expected a size such as 4096, 64KiB or 1MiB from 0 up, got "5Q"'),
        ("{reason: x, wait: 2d}", "2d",
         'options.wait: expected a duration such as 250ms, 2s or 1m from 0 to 3600000 ms, '
         'got "2d"'),
        ("{reason: x, ratio: 1.5}", "1.5", 'options.ratio: expected a number from 0 to 1, got "1.5"'),
        ("{reason: x, count: 11}", "11", 'options.count: expected an integer from 1 to 10, got "11"'),
        ("{reason: x, loud: yes}", "yes", 'options.loud: expected true or false, got "yes"'),
        ("{reason: x, tags: a}", "a}", 'options.tags: expected a list of strings, got "a"'),
        ("{reason: x, tags: [a, [b]]}", "[b]", "options.tags[1]: expected a string, got a list"),
        ("{reason: x, file: ''}", "''", 'options.file: expected a file name, got ""'),
        ("{reason: ''}", "''", 'options.reason: expected 1 to 100 characters, got ""'),
        ("{mode: retry}", "{", "options.reason: missing: why every message fails"),
    ]
    for options, at, expected in cases:
        path = wd.write("bad.yaml", config("tcp://127.0.0.1:9", wd, options))
        status, out, err = fh.run(["check", "-c", path])
        assert status == 2, (options, out, err)
        # Line 7 is "    options: ...", whose value starts in column 14.
        want = "consumer 'r': plugin '%s' refused its options: %s (%s:7:%d)" % (
            plugin("reasoned"), expected, path, 14 + options.index(at))
        assert want in err, (options, want, err)
    path = wd.write("good.yaml", config("tcp://127.0.0.1:9", wd,
                                        "{reason: disk full, limit: 1MiB, wait: 1m, tags: [a, b],"
                                        " extra: {any: thing}, count: 10, offset: -12}"))
    status, out, err = fh.run(["check", "-c", path])
    assert status == 0, out + err
    wd.cleanup()


def test_reason_reaches_the_log_and_the_dead_letter():
    wd = fh.Workdir()
    pub = fh.Publisher()
    retrying = ("    plugin: %s\n    options: {mode: retry, reason: 'try later', limit: 2K, "
                "loud: true}\n    retry: {max_attempts: 2, initial_ms: 1, max_ms: 2}\n"
                % plugin("reasoned"))
    # tp is t in a pool (coalesce makes one): the single worker and the
    # pool share one retry decision, so they log and keep the same words.
    hub = fh.Hub(wd, config(pub.endpoint, wd, "{mode: fail, reason: 'disk full', wait: 250ms}",
                            extra="  - name: t\n" + retrying + "  - name: tp\n" + retrying
                            + "    coalesce: true\n    order_by: topic\n"))
    try:
        hub.wait_log("consumer 'r': values: mode=0 reason=disk full limit=65536 wait_ms=250 "
                     "ratio=0.5 count=3 offset=-7 loud=0 tags=0 file=/dev/null extra=no")
        hub.wait_log("consumer 't': values: mode=1 reason=try later limit=2048 wait_ms=2000 "
                     "ratio=0.5 count=3 offset=-7 loud=1")
        pub.wait_subscribed(hub=hub)
        pub.send("org.fanhub.reason", "body-1")
        fh.wait_for(lambda: all(hub.consumer(hub.stats(), name)["dead_lettered"] == 1
                                for name in ("r", "t", "tp")),
                    "the three dead letters", hub=hub)
        hub.wait_log("consumer 'r': message 1 (org.fanhub.reason) failed: consume answered "
                     "FAIL: disk full (message 1)")
        hub.wait_log("consumer 't': attempt 1 answered RETRY: try later (message 1); retrying")
        for name in ("t", "tp"):
            hub.wait_log("consumer '%s': attempt 1 answered RETRY: try later (message 1); "
                         "retrying" % name)
            hub.wait_log("consumer '%s': message 1 (org.fanhub.reason) failed: consume answered "
                         "RETRY 2 times (retry.max_attempts): try later (message 1)" % name)
            counts = hub.consumer(hub.stats(), name)
            assert (counts["retried"], counts["failed"]) == (1, 1), counts
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    status, out, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", "r"])
    assert status == 0, out + err
    entries = [json.loads(line) for line in out.splitlines() if line.strip()]  # JSON lines
    assert len(entries) == 1 and entries[0]["reason"] == \
        "consume answered FAIL: disk full (message 1)", entries
    status, out, err = fh.run(["dead-letter", "list", "-c", hub.config, "r"])
    assert status == 0 and out.rstrip().endswith("consume answered FAIL: disk full (message 1)"), out
    status, out, err = fh.run(["dead-letter", "show", "-c", hub.config, "r", entries[0]["id"]])
    assert status == 0 and "reason:         consume answered FAIL: disk full (message 1)\n" \
        in out, out
    for name in ("t", "tp"):
        status, out, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", name])
        entries = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert status == 0 and [e["reason"] for e in entries] == [
            "consume answered RETRY 2 times (retry.max_attempts): try later (message 1)"], out
    wd.cleanup()


def test_an_abi_1_1_plugin_still_loads_checks_and_runs():
    wd = fh.Workdir()
    pub = fh.Publisher()
    body = ("bus:\n  connect: %s\nconsumers:\n  - name: old\n    plugin: %s\n"
            "    options: {refuse: %s}\n")
    path = wd.write("refuse.yaml", body % (pub.endpoint, plugin("abi11"), "true"))
    status, out, err = fh.run(["check", "-c", path])
    assert status == 2 and "abi11: refused by its own check (%s:6:23)" % path in err, err
    status, out, err = fh.run(["plugins", "--plugin-dir", fh.TEST_PLUGINS, "--json"])
    listing = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert listing["abi11"]["loaded"] and listing["abi11"]["abi"] == "1.1", listing["abi11"]
    hub = fh.Hub(wd, body % (pub.endpoint, plugin("abi11"), "false"))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(5):
            pub.send("org.fanhub.old", "m%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "old")["completed"] == 5,
                    "the 1.1 plugin to complete 5 messages", hub=hub)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_wrong_type_refused_before_init_and_check():
    """The host reads the options against the plugin's table before it
    calls init (run) or check (check): a value of the wrong form is refused
    with FILE:LINE:COL and neither callback leaves its trace."""
    wd = fh.Workdir()
    marker = wd.file("init-ran")
    path = wd.write("bad.yaml",
                    "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n  - name: t\n"
                    "    plugin: %s\n    options: {marker: %s, count: many}\n"
                    % (plugin("tabled"), json.dumps(marker)))
    col = 1 + len("    options: {marker: %s, count: " % json.dumps(marker))
    want = ("%s:4:5: consumer 't': plugin '%s' refused its options: options.count: expected an "
            "integer from 1 to 10, got \"many\" (%s:6:%d)" % (path, plugin("tabled"), path, col))
    status, out, err = fh.run(["check", "-c", path])
    assert status == 2 and want in err and "check ran" not in err, err
    status, out, err = fh.run(["run", "-c", path])
    assert status == 2 and want in err, err
    assert not os.path.exists(marker), "init ran on options its table refuses"
    # The same plugin with good options: check runs, and so does init.
    good = wd.write("good.yaml", open(path).read().replace("count: many", "count: 3"))
    status, out, err = fh.run(["check", "-c", good])
    assert status == 0 and "tabled: check ran" in err, err
    wd.cleanup()


def test_new_types_refused_before_init_and_check():
    """ABI 1.4's types (lists of maps, maps, string-or-list, endpoints,
    secrets): each given a node of the wrong kind, an endpoint that is
    not one, a secret file others may read and an unset variable are
    refused before init or check runs, with FILE:LINE:COL."""
    wd = fh.Workdir()
    marker = wd.file("init-ran")
    tight = wd.write("tight", "s3cret\n")
    os.chmod(tight, 0o600)
    loose = wd.write("loose", "s3cret\n")
    os.chmod(loose, 0o644)
    assert "FANHUB_TEST_UNSET_SECRET" not in os.environ
    cases = [  # (options, the text the error points at, the message)
        ("maps: {a: 1}", "{a", "options.maps: expected a list of maps, got a map"),
        ("maps: [a]", "a]", "options.maps[0]: expected a map, got a scalar"),
        ("map: [a]", "[a", "options.map: expected a map {name}, got a list"),
        ("map: {name: [a]}", "[a", "options.map.name: expected a string, got a list"),
        ("map: {nom: a}", "a}", "options.map.nom: unknown key; map takes name"),
        ("command: {a: 1}", "{a", "options.command: expected a string or a list of strings, "
                                  "got a map"),
        ("command: [a, [b]]", "[b", "options.command[1]: expected a string, got a list"),
        ("endpoint: [a]", "[a", "options.endpoint: expected an endpoint such as "
                                "tcp://127.0.0.1:9941, got a list"),
        ("endpoint: 'tcp://127.0.0.1'", "'tcp", "options.endpoint: expected a ZeroMQ endpoint, "
                                               "got \"tcp://127.0.0.1\": expected tcp://HOST:PORT"),
        ("peers: ['tcp://*:1', 'udp://x']", "'udp", "options.peers[1]: expected a ZeroMQ endpoint, "
                                                   "got \"udp://x\": unsupported transport"),
        ("secret_file: [a]", "[a", "options.secret_file: expected a file name, got a list"),
        ("secret_file: %s" % json.dumps(loose), json.dumps(loose),
         "options.secret_file: %s: other users may read or change it; refusing it" % loose),
        ("secret_env: FANHUB_TEST_UNSET_SECRET", "FANHUB_TEST_UNSET_SECRET",
         "options.secret_env: the environment variable FANHUB_TEST_UNSET_SECRET is not set"),
        ("secret_file: %s, secret_env: HOME" % json.dumps(tight), "HOME",
         "options.secret_env: give secret_file or secret_env, not both"),
    ]
    head = "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n  - name: t\n    plugin: %s\n" \
        % plugin("tabled")
    for options, at, expected in cases:
        line = "    options: {marker: %s, %s}\n" % (json.dumps(marker), options)
        path = wd.write("bad.yaml", head + line)
        want = "%s:4:5: consumer 't': plugin '%s' refused its options: %s" % (
            path, plugin("tabled"), expected)
        where = "(%s:6:%d)" % (path, line.index(at) + 1)
        for command in ("check", "run"):
            status, out, err = fh.run([command, "-c", path])
            assert status == 2 and want in err and where in err, (command, options, where, err)
            assert "check ran" not in err and "s3cret" not in err, err
        assert not os.path.exists(marker), ("init ran", options)
    good = ("maps: [{a: 1}], map: {name: x}, command: [a, b], endpoint: 'tcp://127.0.0.1:9', "
            "peers: 'tcp://*:9', secret_file: %s" % json.dumps(tight))
    path = wd.write("good.yaml", head + "    options: {marker: %s, %s}\n"
                    % (json.dumps(marker), good))
    status, out, err = fh.run(["check", "-c", path])
    assert status == 0 and "tabled: check ran" in err, err
    wd.cleanup()


def test_an_abi_1_2_plugin_still_loads_and_runs():
    """ABI 1.3 appended to the host table only: a 1.2 plugin loads, is
    listed as 1.2, reads its option table and gives its reasons."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("state_dir: %s\nbus:\n  connect: %s\nconsumers:\n"
              "  - name: ok\n    plugin: %s\n    topics: [org.ok]\n"
              "  - name: failing\n    plugin: %s\n    topics: [org.fail]\n"
              "    options: {answer: fail}\n"
              % (wd.file("state"), pub.endpoint, plugin("abi12"), plugin("abi12")))
    status, out, err = fh.run(["plugins", "--plugin-dir", fh.TEST_PLUGINS, "--json"])
    listing = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert listing["abi12"]["loaded"] and listing["abi12"]["abi"] == "1.2", listing["abi12"]
    hub = fh.Hub(wd, config)
    try:
        status, out, err = fh.run(["check", "-c", hub.config])
        assert status == 0, err
        pub.wait_subscribed(hub=hub)
        for i in range(5):
            pub.send("org.ok", "m%d" % i)
        pub.send("org.fail", "bad")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "ok")["completed"] == 5
                    and hub.consumer(hub.stats(), "failing")["dead_lettered"] == 1,
                    "the 1.2 plugin to complete 5 and fail 1", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    status, out, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", "failing"])
    assert "consume answered FAIL: old plugin (message 6)" in out, out
    wd.cleanup()


def test_an_abi_1_3_plugin_still_loads_and_runs():
    """ABI 1.4 appended to the host table and to the option types only: a
    1.3 plugin loads, is listed as 1.3, is checked by its check (reading
    its table with options_read and the descriptor), refuses a bad value
    with FILE:LINE:COL and runs."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    status, out, err = fh.run(["plugins", "--plugin-dir", fh.TEST_PLUGINS, "--json"])
    listing = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert listing["abi13"]["loaded"] and listing["abi13"]["abi"] == "1.3", listing["abi13"]
    bad = wd.write("bad.yaml", "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n"
                   "  - name: t\n    plugin: %s\n    options: {tags: x}\n" % plugin("abi13"))
    status, out, err = fh.run(["check", "-c", bad])
    assert status == 2 and "options.tags: expected a list of strings, got \"x\" (%s:6:21)" % bad \
        in err, err
    config = ("state_dir: %s\nbus:\n  connect: %s\nconsumers:\n"
              "  - name: ok\n    plugin: %s\n    topics: [org.ok]\n    options: {tags: [a]}\n"
              "  - name: failing\n    plugin: %s\n    topics: [org.fail]\n"
              "    options: {answer: fail}\n"
              % (wd.file("state"), pub.endpoint, plugin("abi13"), plugin("abi13")))
    hub = fh.Hub(wd, config)
    try:
        status, out, err = fh.run(["check", "-c", hub.config])
        assert status == 0, err
        pub.wait_subscribed(hub=hub)
        for i in range(3):
            pub.send("org.ok", "m%d" % i)
        pub.send("org.fail", "bad")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "ok")["completed"] == 3
                    and hub.consumer(hub.stats(), "failing")["dead_lettered"] == 1,
                    "the 1.3 plugin to complete 3 and fail 1", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_plugins_prints_the_table,
             test_check_reads_typed_values_and_refuses_with_the_place,
             test_reason_reaches_the_log_and_the_dead_letter,
             test_an_abi_1_1_plugin_still_loads_checks_and_runs,
             test_wrong_type_refused_before_init_and_check,
             test_new_types_refused_before_init_and_check,
             test_an_abi_1_2_plugin_still_loads_and_runs,
             test_an_abi_1_3_plugin_still_loads_and_runs])
