"""Mistakes that used to pass `fanhub check` (issue 26), against the real
binary: a consumer named '..' (its state would land beside state_dir) is
refused by check and run; a topic pattern written as a regular expression
is a warning at its place, from check and from run (in a drop-in too); an
unquoted '*' gets the hint that it must be quoted."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

REGEX = "^org\\.fedoraproject\\..*$"


def test_dotted_name_refused():
    wd = fh.Workdir()
    state = wd.file("state")
    text = ("bus: {connect: tcp://127.0.0.1:9}\nstate_dir: %s\ncontrol: ipc://%s\n"
            "consumers:\n  - name: '..'\n    plugin: \"null\"\n" % (state, wd.file("ctl")))
    path = wd.write("fanhub.yaml", text)
    expected = ("%s:5:11: consumers[0].name: '..': a consumer name may not start with '.' "
                "(it names the consumer's directory in state_dir)")
    status, out, err = fh.run(["check", "-c", path])
    assert status == 2 and expected % path in err, (status, out, err)
    hub = fh.Hub(wd, text, name="run")
    assert hub.wait() == 2, hub.log()
    assert expected % hub.config in hub.log(), hub.log()
    assert not os.path.exists(state), "nothing made for a refused configuration"
    wd.cleanup()


def test_regex_pattern_warned():
    wd = fh.Workdir()
    pub = fh.Publisher()
    os.mkdir(wd.file("conf.d"))
    dropin = wd.write("conf.d/re.yaml", 'consumers:\n  - name: re\n    plugin: "null"\n'
                      "    topics:\n      - '%s'\n" % REGEX)
    text = ("bus: {connect: %s}\ninclude: conf.d/*.yaml\nconsumers:\n"
            "  - {name: spaced, plugin: \"null\", topics: [org fedora]}\n" % pub.endpoint)
    hub = fh.Hub(wd, text)
    try:
        warnings = [
            "%s:4:45: consumers[0].topics[0]: 'org fedora' has whitespace: topic patterns are "
            "not regular expressions (a prefix, '*' for any run of characters, '=' for an exact "
            "topic); it will likely never match" % hub.config,
            "%s:5:9: consumers[0].topics[0]: '%s' has '^': topic patterns are not regular "
            "expressions" % (dropin, REGEX),
        ]
        status, out, err = fh.run(["check", "-c", hub.config])
        assert status == 0 and "OK, 2 consumers" in out, (status, out, err)
        for line in warnings:
            assert "fanhub check: warning: " + line in err, (line, err)
        pub.wait_subscribed(hub=hub)
        for line in warnings:
            hub.wait_log(line)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_unquoted_star_hint():
    wd = fh.Workdir()
    path = wd.write("fanhub.yaml", "bus: {connect: tcp://127.0.0.1:9}\nconsumers:\n"
                    "  - name: a\n    plugin: \"null\"\n    topics: *.buildsys.*\n")
    status, out, err = fh.run(["check", "-c", path])
    assert status == 2, (status, out, err)
    assert ("%s:5:14: YAML syntax error: did not find expected alphabetic or numeric character "
            "(while scanning an alias): a value starting with * must be quoted" % path) in err, err
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_dotted_name_refused, test_regex_pattern_warned, test_unquoted_star_hint])
