"""One campaign over many jobs and a JIT kernel: shards split a run's cases
exactly, --compile-keys holds every drawn case to a few compile keys while
the cases still vary, and a failure shrinks below the keys (one more
compile is cheap next to a 64-request counterexample); neighbouring seeds
share no cases."""
import json
import os
import re
import sys
import time
from collections import Counter

from conftest import SOURCE


def judged(run, *args):
    done = run("fuzz", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return [tuple(row) for row in json.loads(done.stdout)["suites"][0]["judged"]]


def test_two_shards_judge_exactly_the_cases_of_the_whole_run(run):
    for keys in ("0", "3"):
        common = ["--cases", "40", "--seed", "7", "--case-size", "small", "--compile-keys", keys]
        whole = judged(run, *common)
        one, two = judged(run, *common, "--shard", "1/2"), judged(run, *common, "--shard", "2/2")
        assert len(whole) == 40 and len(one) == 20 and len(two) == 20
        assert sorted(one + two) == sorted(whole)
        assert not set(one) & set(two)


def test_compile_keys_bound_what_a_specializing_kernel_compiles(run, port_command, tmp_path):
    record = tmp_path / "keys.txt"
    env = {"RECORD_KEYS_TO": str(record)}
    done = run("fuzz", "--port", port_command("recording_port:scores"), "--cases", "60", "--case-size", "small",
               "--compile-keys", "3", "--out-mode", "given", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = Counter(record.read_text().splitlines())
    assert 1 <= len(calls) <= 3 and sum(calls.values()) == 60, calls
    # The cases still differ within a key.
    cases = {row[1] for row in json.loads(run("fuzz", "--json", "--cases", "60", "--case-size", "small",
                                              "--compile-keys", "3").stdout)["suites"][0]["judged"]}
    assert len(cases) > 30

    # A failing case shrinks below the keys: to two requests or fewer, one query token, one head.
    failed = run("fuzz", "--port", port_command("recording_port:cutoff_slack_one"), "--cases", "30", "--case-size",
                 "small", "--compile-keys", "3", "--out-mode", "given", "--seed", "3", env=env)
    assert failed.returncode == 1, failed.stderr
    shrunk = re.search(r"shrunk: (Case\{.*)", failed.stderr).group(1)
    batch, heads = (int(re.search(p, shrunk).group(1)) for p in (r" B=(\d+)", r" H=(\d+)"))
    assert batch <= 2 and heads == 1, shrunk


def test_neighbouring_seeds_share_no_cases(run):
    one, two = (set(row[1] for row in judged(run, "--cases", "200", "--case-size", "small", "--seed", seed))
                for seed in ("1", "2"))
    assert len(one) == 200 and len(two) == 200 and not one & two


def test_unlimited_keys_draw_many(run, port_command, tmp_path):
    record = tmp_path / "keys.txt"
    done = run("fuzz", "--port", port_command("recording_port:scores"), "--cases", "60", "--case-size", "small",
               "--out-mode", "given", env={"RECORD_KEYS_TO": str(record)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(set(record.read_text().splitlines())) > 20


def test_a_crashing_port_is_shrunk_and_reported_within_the_shrink_bound(run, tmp_path):
    """Every call crashes the port (a restart each): the first failure still shrinks to one request and is
    reported within the shrink's bound of 200 calls and 60 s, plus the case itself."""
    crash = (f"env PYTHONPATH={os.path.join(SOURCE, 'python')} {sys.executable} "
             f"{os.path.join(SOURCE, 'property_tests', 'ports', 'broken_port.py')} crash")
    t0 = time.monotonic()
    done = run("fuzz", "--port", crash, "--cases", "200", "--case-size", "small", "--seed", "1")
    took = time.monotonic() - t0
    assert done.returncode == 1, done.stdout + done.stderr
    shrunk = re.search(r"shrunk: (Case\{.*)", done.stderr).group(1)
    assert " B=1 " in shrunk and " H=1 " in shrunk, shrunk
    assert took < 60 + 30, took


def _false_alarms(ctxscore_bin, port, *gate_args):
    import subprocess
    return subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "false_alarms"), "--ctxscore", ctxscore_bin,
                           "--port", port, "--runs", "2", "--jobs", "2", "--progress", "--",
                           "--check", "fuzz", "--cases", "40", "--case-size", "small", *gate_args],
                          capture_output=True, text=True, timeout=300)


def test_false_alarms_passes_a_correct_port_and_counts_each_failing_gate(ctxscore_bin, port_command):
    clean = _false_alarms(ctxscore_bin, port_command("ctxscore.ports.numpy_port:scores"))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("0 failing of 2 fresh-seed gates (0 did not report)"), clean.stdout
    assert len(re.findall(r"^gate [12] of 2: passed in ", clean.stderr, re.M)) == 2, clean.stderr
    planted = _false_alarms(ctxscore_bin, port_command("ctxscore.ports.numpy_port:cutoff_slack_one"))
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert planted.stdout.startswith("2 failing of 2"), planted.stdout
    assert len(re.findall(r"^FALSE ALARM, seed \d+:\n  fuzz", planted.stdout, re.M)) == 2, planted.stdout
    assert "gate 2 of 2: FAILED" in planted.stderr and "2 not passing so far" in planted.stderr, planted.stderr
    seeded = _false_alarms(ctxscore_bin, port_command("ctxscore.ports.numpy_port:scores"), "--seed", "3")
    assert "--seed among the gate's arguments" in seeded.stderr, seeded.stderr
    assert seeded.returncode == 2 and "every gate must draw a fresh one" in seeded.stderr, seeded.stderr
