"""The shipped Prometheus alert rules (config/prometheus/fanhub-alerts.yaml):
promtool accepts them, their promtool unit tests
(tests/prometheus/fanhub-alerts.test.yaml) pass, every rule has a case
where it fires and one where it stays silent, the rules name only metrics
the hub exports (docs/metrics.md), and the unit tests catch a rule whose
threshold is broken. Needs no hub: promtool evaluates fed series."""
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

RULES = os.path.join(fh.SOURCE_DIR, "config", "prometheus", "fanhub-alerts.yaml")
TESTS = os.path.join(fh.SOURCE_DIR, "tests", "prometheus", "fanhub-alerts.test.yaml")


def promtool():
    return fh.require_tool(shutil.which("promtool"), "promtool", "prometheus")


def run_promtool(*args):
    proc = subprocess.run([promtool()] + list(args), capture_output=True, timeout=120)
    return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")


def rules():
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def test_promtool_checks_the_rules():
    status, out = run_promtool("check", "rules", RULES)
    assert status == 0, out
    assert "SUCCESS: %d rules found" % len(rules()) in out, out


def test_promtool_unit_tests_pass():
    status, out = run_promtool("test", "rules", TESTS)
    assert status == 0 and "SUCCESS" in out, out


def test_every_rule_fires_and_stays_silent():
    with open(TESTS) as f:
        cases = [c for t in yaml.safe_load(f)["tests"] for c in t["alert_rule_test"]]
    for rule in rules():
        name = rule["alert"]
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), "%s never fires in the unit tests" % name
        assert any(not c["exp_alerts"] for c in mine), "%s is never silent in them" % name
        for case in mine:
            for alert in case["exp_alerts"]:
                assert alert["exp_labels"]["severity"] == rule["labels"]["severity"], name
                assert alert.get("exp_annotations"), "%s: annotations unchecked" % name


def test_rules_name_the_hubs_metrics():
    with open(os.path.join(fh.SOURCE_DIR, "docs", "metrics.md")) as f:
        documented = set(re.findall(r"`(fanhub_[a-z_]+)`", f.read()))
    for rule in rules():
        for metric in re.findall(r"\bfanhub_[a-z_]+", rule["expr"]):
            assert metric in documented, "%s: %s is not in docs/metrics.md" % (
                rule["alert"], metric)


def test_the_unit_tests_catch_a_broken_rule():
    """The same unit tests against rules whose thresholds are off by one
    step (> 0 becoming > 1000, == 0 becoming == 1, a day ahead becoming an
    hour) must fail, rule by rule."""
    wd = fh.Workdir()
    with open(RULES) as f:
        original = yaml.safe_load(f)
    with open(TESTS) as f:
        tests = f.read().replace("../../config/prometheus/fanhub-alerts.yaml", "rules.yaml")
    wd.write("tests.yaml", tests)
    for index, rule in enumerate(rules()):
        expr = rule["expr"]
        broken = re.sub(r"> 0(?![.\d])", "> 1000", expr)
        broken = re.sub(r"== 0(?![.\d])", "== 1", broken).replace("> 0.8", "> 1.5")
        broken = broken.replace("< 86400", "< 3600")
        assert broken != expr, rule["alert"]
        copy = yaml.safe_load(yaml.safe_dump(original))
        copy["groups"][0]["rules"][index]["expr"] = broken
        wd.write("rules.yaml", yaml.safe_dump(copy))
        status, out = run_promtool("test", "rules", wd.file("tests.yaml"))
        assert status != 0, "%s broken, and its unit tests still pass" % rule["alert"]
        assert "alertname: %s" % rule["alert"] in out, out
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_promtool_checks_the_rules,
             test_promtool_unit_tests_pass,
             test_every_rule_fires_and_stays_silent,
             test_rules_name_the_hubs_metrics,
             test_the_unit_tests_catch_a_broken_rule])
