"""Every subcommand speaks through one option layer (hub/cmd/cli.c).

The commands are taken from `fanhub --help`, and each one's options from
its own --help, so a new command or option is covered without touching
this file. For every command:
- an unknown option, long or short: `fanhub CMD: unknown option '--x'`,
  then `try 'fanhub CMD --help'`, exit status 2, nothing on stdout;
- every option that takes a value, given none: `fanhub CMD: option
  '--name' needs a value`, the same hint, exit 2;
- a flag given a value (`--flag=1`): `option '--flag' takes no value`;
- `fanhub help CMD` prints exactly what `fanhub CMD --help` prints;
- `--version` works, with the version `fanhub --version` prints;
- the commands that talk to a running hub (`-c FILE | -e ENDPOINT`) find
  its control endpoint alike: -c with -e is bad usage, a configuration
  that does not load is named, exit 2, before any hub is asked;
- `-c` has one meaning: wherever a command has it, it is `--config FILE`;
- a misspelled command gets "did you mean" with the closest commands;
- a typed option (seconds, milliseconds) refuses a value that does not
  parse or is out of range in one wording, whichever command has it.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

# What a command needs before its options (dead-letter takes an action).
LEADING = {"dead-letter": ["list"]}


def commands():
    status, out, _ = fh.run(["--help"])
    assert status == 0, out
    names = re.findall(r"^  ([a-z][a-z-]*)  ", out.split("commands:", 1)[1], re.M)
    # The commands of this round, at least; any later one is checked too.
    for must in ("run", "check", "stats", "collectd", "emit", "reload", "dead-letter",
                 "plugins", "replay", "pub", "tail"):
        assert must in names, (must, names)
    return names


def options_of(help_text):
    """(long name, takes a value) of each option in a --help text."""
    found = []
    for m in re.finditer(r"^  (?:-\w, |    )--([a-z][a-z-]*)( [A-Z][A-Z_|.]*)?(?:\s|$)",
                         help_text, re.M):
        found.append((m.group(1), bool(m.group(2))))
    return found


def expect_usage_error(args, command, what):
    status, out, err = fh.run(args)
    assert status == 2, (args, status, err)
    assert out == "", (args, out)
    assert err == "fanhub %s: %s\ntry 'fanhub %s --help'\n" % (command, what, command), \
        (args, err)


def test_unknown_options():
    for command in commands():
        lead = [command] + LEADING.get(command, [])
        expect_usage_error([command, "--bogus"], command, "unknown option '--bogus'")
        expect_usage_error(lead + ["--bogus=1"], command, "unknown option '--bogus'")
        expect_usage_error(lead + ["-Z"], command, "unknown option '-Z'")
    # In a cluster of short options, wherever it stands.
    for cluster in ("-vZ", "-Zv"):
        expect_usage_error(["run", "-q", cluster], "run", "unknown option '-Z'")
        expect_usage_error(["run", "--quiet", cluster], "run", "unknown option '-Z'")
    expect_usage_error(["run", "-vc"], "run", "option '-c' needs a value")


def test_missing_values_and_flags_with_values():
    checked = 0
    for command in commands():
        lead = [command] + LEADING.get(command, [])
        status, help_text, _ = fh.run([command, "--help"])
        assert status == 0, help_text
        options = options_of(help_text)
        assert ("help", False) in options and ("version", False) in options, \
            (command, options)
        for name, takes_value in options:
            if takes_value:
                expect_usage_error(lead + ["--" + name], command,
                                   "option '--%s' needs a value" % name)
                checked += 1
            elif name not in ("help", "version"):
                expect_usage_error(lead + ["--%s=1" % name], command,
                                   "option '--%s' takes no value" % name)
                checked += 1
    assert checked > 30, checked


def test_help_command_equals_help_option():
    for command in commands():
        status, by_option, err = fh.run([command, "--help"])
        assert status == 0 and err == "", (command, err)
        assert by_option.startswith("usage: fanhub %s" % command), by_option[:80]
        status, by_command, err = fh.run(["help", command])
        assert status == 0 and err == "", (command, err)
        assert by_command == by_option, command
        status, short, _ = fh.run([command, "-h"])
        assert status == 0 and short == by_option, command
    status, _, err = fh.run(["help", "nosuchcommand"])
    assert status == 2 and "'nosuchcommand' is not a command" in err, err


def test_version_everywhere():
    status, version, _ = fh.run(["--version"])
    assert status == 0 and re.match(r"^fanhub \d+\.\d+\.\d+ \(plugin ABI 1\.\d+\)\n$", version), \
        version
    for command in commands():
        status, out, err = fh.run([command, "--version"])
        assert status == 0 and out == version and err == "", (command, status, out, err)


# What such a command needs after its options; stats says its own words
# for -c with -e, as it also takes --input.
OPERANDS = {"emit": ["a.topic"], "restart": ["a"], "pause": ["a"], "resume": ["a"]}
NOT_BOTH = {"stats": "give one of -c, -e or --input (and --watch only with a hub)"}


def test_control_endpoint_lookup():
    checked = []
    missing = "/nonexistent/fanhub.yaml"
    for command in commands():
        status, help_text, _ = fh.run([command, "--help"])
        names = [name for name, _ in options_of(help_text)]
        if "config" not in names or "endpoint" not in names:
            continue
        lead = [command] + LEADING.get(command, [])
        tail = OPERANDS.get(command, [])
        expect_usage_error(lead + ["-c", "x.yaml", "-e", "tcp://127.0.0.1:1"] + tail, command,
                           NOT_BOTH.get(command, "give -c or -e, not both"))
        status, out, err = fh.run(lead + ["-c", missing] + tail)
        assert status == 2 and out == "", (command, status, out)
        assert err == "fanhub %s: %s: cannot open: No such file or directory\n" % (
            command, missing), (command, err)
        checked.append(command)
    for must in ("stats", "collectd", "emit", "reload"):
        assert must in checked, (must, checked)
    expect_usage_error(["reload", "now"], "reload", "unexpected argument 'now'")
    for command in ("restart", "pause", "resume"):
        expect_usage_error([command, "-e", "tcp://127.0.0.1:1"], command,
                           "which consumer? (the CONSUMER argument)")
        expect_usage_error([command, "-e", "tcp://127.0.0.1:1", "a", "b"], command,
                           "unexpected argument 'b'")


def test_c_is_always_config():
    with_c = []
    for command in commands():
        status, help_text, _ = fh.run([command, "--help"])
        assert status == 0, help_text
        short = re.findall(r"^  -c, --([a-z-]+) ([A-Z]+)", help_text, re.M)
        if short:
            assert short == [("config", "FILE")], (command, short)
            with_c.append(command)
    for must in ("run", "check", "stats", "collectd", "emit", "reload", "pub", "tail"):
        assert must in with_c, (must, with_c)
    # --connect stays, long only.
    for command in ("pub", "tail"):
        status, help_text, _ = fh.run([command, "--help"])
        assert re.search(r"^      --connect EP ", help_text, re.M), help_text


def test_did_you_mean():
    for typed, says in (
            ("chek", "; did you mean 'check'?"),
            ("stat", "; did you mean 'stats'?"),
            ("tial", "; did you mean 'tail'?"),        # two letters swapped
            ("reloda", "; did you mean 'reload'?"),
            ("dead", "; did you mean 'dead-letter'?"),  # the start of one
            ("re", "; did you mean 'reload' or 'restart' or 'resume' or 'replay'?"),
            ("frobnicate", ""),                         # nothing close
            ("x", "")):
        for args in ([typed], ["help", typed], [typed, "--help"]):
            status, out, err = fh.run(args)
            assert status == 2 and out == "", (args, status, out)
            assert err == "fanhub: '%s' is not a command%s (see 'fanhub --help')\n" % (
                typed, says), (args, err)


SECONDS = "expected seconds from %s to %s (or a duration such as 250ms, 2s or 1m), got '%s'"


def test_typed_values():
    # The commands' seconds and milliseconds options, read by the layer's
    # table (cli.h fh_cli_value_t): not a number, and out of range.
    for args, what in (
            (["check", "--timeout", "soon"], "--timeout: " + SECONDS % ("0.001", "3600", "soon")),
            (["check", "--timeout", "3601"], "--timeout: " + SECONDS % ("0.001", "3600", "3601")),
            (["emit", "--timeout", "-1", "a.topic"], "--timeout: " + SECONDS % ("0", "86400", "-1")),
            (["emit", "-t", "2d", "a.topic"], "--timeout: " + SECONDS % ("0", "86400", "2d")),
            (["reload", "--timeout", "0"], "--timeout: " + SECONDS % ("0.001", "86400", "0")),
            (["reload", "-t", "1.0001"], "--timeout: " + SECONDS % ("0.001", "86400", "1.0001")),
            (["restart", "-t", "25h", "a"], "--timeout: " + SECONDS % ("0.001", "86400", "25h")),
            (["restart", "--timeout", "x", "a"], "--timeout: " + SECONDS % ("0.001", "86400", "x")),
            (["replay", "-t", "0", "-p", "log"], "--timeout: " + SECONDS % ("0.001", "86400", "0")),
            (["replay", "--timeout", "1e3", "-p", "log"],
             "--timeout: " + SECONDS % ("0.001", "86400", "1e3")),
            (["collectd", "--interval", "0"], "--interval: " + SECONDS % ("0.001", "86400", "0")),
            (["collectd", "--disconnected-after", "soon"],
             "--disconnected-after: " + SECONDS % ("0.001", "86400", "soon")),
            (["stats", "--timeout", "0"], "--timeout: expected milliseconds from 1 to 3600000 "
             "(or a duration such as 250ms, 2s or 1m), got '0'"),
            (["stats", "-t", "1.5"], "--timeout: expected milliseconds from 1 to 3600000 "
             "(or a duration such as 250ms, 2s or 1m), got '1.5'"),
            (["stats", "-t", "2h"], "--timeout: expected milliseconds from 1 to 3600000 "
             "(or a duration such as 250ms, 2s or 1m), got '2h'")):
        expect_usage_error(args, args[0], what)


if __name__ == "__main__":
    fh.main([test_unknown_options, test_missing_values_and_flags_with_values,
             test_help_command_equals_help_option, test_version_everywhere,
             test_control_endpoint_lookup, test_c_is_always_config, test_did_you_mean,
             test_typed_values])
