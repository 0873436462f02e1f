#!/usr/bin/python3
"""The guard's own failure paths, without valgrind's runs: the comparison
(over the threshold fails, at it passes, a faster case passes with a note,
a case missing from the baseline fails), a toggled function the dump
lacks (renamed or inlined: its case would look faster), a missing valgrind (fails under
CI=true, skips outside), a missing binary."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_guard  # noqa: E402

GUARD = os.path.join(HERE, "perf_guard.py")
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def test_compare():
    base = {"cases": {"k1": {"ir_per_delivery": 1000.0}, "k4": {"ir_per_delivery": 500.0}}}
    lines, ok = perf_guard.compare(base, {"k1": 1030.0, "k4": 500.0}, 3.0)
    check(ok and not any("FAIL" in x for x in lines), "3.0 % more passes")
    lines, ok = perf_guard.compare(base, {"k1": 1000.0, "k4": 515.5}, 3.0)
    check(not ok and any(x.startswith("k4") and "FAIL" in x for x in lines),
          "3.1 % more fails, naming the case")
    lines, ok = perf_guard.compare(base, {"k1": 900.0}, 3.0)
    check(ok and any("update the baseline" in x for x in lines),
          "10 % less passes with a note to update the baseline")
    lines, ok = perf_guard.compare(base, {"spill": 900.0}, 3.0)
    check(not ok and any("not in the baseline" in x for x in lines),
          "a case the baseline lacks fails")
    base["cases"]["k4"]["threshold_pct"] = 5.0
    lines, ok = perf_guard.compare(base, {"k1": 1000.0, "k4": 524.5}, 3.0)
    check(ok, "a case's own threshold (4.9 % within its 5 %) passes")
    lines, ok = perf_guard.compare(base, {"k1": 1000.0, "k4": 526.0}, 3.0)
    check(not ok and any("more than 5 %" in x for x in lines),
          "5.2 % fails against a case's own 5 %")


def test_update_keeps_thresholds():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "baseline.json")
        with open(path, "w") as f:
            json.dump({"threshold_pct": 3.0, "cases": {"spill": {"ir_per_delivery": 2000.0,
                                                                 "threshold_pct": 5.0}}}, f)
        perf_guard.write_baseline(path, {"spill": 1990.04, "k1": 1000.0})
        with open(path) as f:
            cases = json.load(f)["cases"]
        check(cases["spill"] == {"ir_per_delivery": 1990.0, "threshold_pct": 5.0}
              and cases["k1"] == {"ir_per_delivery": 1000.0},
              f"--update keeps a case's own threshold: {cases}")


def run_guard(args, env):
    return subprocess.run([sys.executable, GUARD] + args, capture_output=True, text=True,
                          env=env, timeout=120)


def test_missing_valgrind():
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, PATH=empty)
        env.pop("CI", None)
        p = run_guard(["--build", empty], env)
        check(p.returncode == 77 and "valgrind is missing" in p.stdout,
              f"no valgrind outside CI skips (77): {p.returncode} {p.stdout.strip()}")
        env["CI"] = "true"
        p = run_guard(["--build", empty], env)
        check(p.returncode == 1 and "valgrind is missing" in p.stdout,
              f"no valgrind under CI=true fails: {p.returncode} {p.stdout.strip()}")


def test_missing_binary():
    with tempfile.TemporaryDirectory() as build:
        p = run_guard(["--build", build], dict(os.environ))
        if p.returncode == 77:
            check(os.environ.get("CI") != "true", "valgrind missing: skipped outside CI")
            return
        check(p.returncode == 1 and "is missing: build the tree first" in p.stdout,
              f"a build without the binaries fails: {p.returncode} {p.stdout.strip()}")


def test_missing_functions():
    with tempfile.NamedTemporaryFile("w", suffix=".cg") as f:
        f.write("events: Ir\nfn=(1) s_route\n1 10\ncfn=(2) s_attempt.isra.0\ncalls=1 0\n"
                "1 5\nfn=(2)\n1 5\nfn=(1)\n2 3\n")
        f.flush()
        got = perf_guard.missing_functions(f.name, ["s_route", "fh_queue_pop", "s_attempt"])
        check(got == ["fh_queue_pop"], f"a toggled function absent from the dump is named: {got}")


test_compare()
test_update_keeps_thresholds()
test_missing_functions()
test_missing_valgrind()
test_missing_binary()
sys.exit(1 if failures else 0)
