"""`ctxscore bench` through the protocol: the native reference port and the
numpy port timed side by side, the report's shape, the comparison with a
baseline, and a non-zero exit when a port is slower than its baseline (a
port that sleeps)."""
import json
import os
import shlex
import sys

import pytest

CASES = ["--case", "length_129", "--case", "upstream_two_requests_rank0"]


@pytest.fixture
def native_reference():
    return f"{os.environ['CTXSCORE_NATIVE_PORT']} {os.environ['CTXSCORE_REFERENCE_PORT_LIB']}"


def bench(run, *args, env=None):
    done = run("bench", *CASES, "--calls", "5", "--json", *args, env=env)
    return done, (json.loads(done.stdout) if done.stdout.strip() else None)


def test_bench_times_each_port_beside_the_first(run, port_command, native_reference):
    done, report = bench(run, "--port", native_reference, "--port", port_command("ctxscore.ports.numpy_port:scores"))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report["rows"]
    assert [(r["case"], r["backend"]) for r in rows] == [
        ("length_129", "port:ctxscore reference (native)"), ("length_129", "port:ctxscore.ports.numpy_port:scores"),
        ("upstream_two_requests_rank0", "port:ctxscore reference (native)"),
        ("upstream_two_requests_rank0", "port:ctxscore.ports.numpy_port:scores")]
    for r in rows:
        assert r["median_us"] > 0 and r["calls"] == 5 and r["bytes"] > 0 and r["copy_gb_per_s"] > 0, r
        assert r["gb_per_s"] == pytest.approx(r["bytes"] / r["median_us"] * 1e-3), r
        assert r["copy_fraction"] == pytest.approx(r["gb_per_s"] / r["copy_gb_per_s"]), r
        assert r["method"] and r["toolchain"], r
    for first, second in (rows[0:2], rows[2:4]):
        assert first["vs_first"] == 1.0
        assert second["vs_first"] == pytest.approx(first["median_us"] / second["median_us"])
    assert "numpy" in rows[1]["toolchain"] and "native worker" in rows[0]["toolchain"]
    assert report["ok"] is True and report["slower"] == []


def test_a_port_slower_than_its_baseline_fails_the_gate(run, port_command, tmp_path):
    fast = port_command("ctxscore.ports.numpy_port:scores", "--name", "numpy")
    slow = port_command("slow_port:scores", "--name", "numpy")  # the same label, a sleep before each call
    done, report = bench(run, "--port", fast)
    assert done.returncode == 0, done.stdout + done.stderr
    baseline = tmp_path / "baseline.json"
    baseline.write_text(done.stdout)
    same, again = bench(run, "--port", fast, "--baseline", str(baseline), "--max-slowdown", "10000")
    assert same.returncode == 0 and again["ok"], same.stdout + same.stderr
    slower, verdict = bench(run, "--port", slow, "--baseline", str(baseline), "--max-slowdown", "50",
                            env={"SLOW_PORT_SECONDS": "0.05"})
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert verdict["ok"] is False and len(verdict["slower"]) == 2, verdict["slower"]
    assert all("on port:numpy" in s and "% slower, more than 50.0 %" in s for s in verdict["slower"]), verdict["slower"]
    text = run("bench", *CASES, "--calls", "3", "--port", slow, "--baseline", str(baseline), "--max-slowdown", "50",
               env={"SLOW_PORT_SECONDS": "0.05"})
    assert text.returncode == 1 and "SLOWER: length_129 on port:numpy" in text.stdout, text.stdout


def test_a_baseline_row_not_measured_now_fails_and_bad_baselines_are_named(run, port_command, tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"rows": [{"case": "length_129", "backend": "port:other", "median_us": 5.0}]}))
    done, report = bench(run, "--port", port_command("ctxscore.ports.numpy_port:scores"), "--baseline", str(baseline),
                         "--max-slowdown", "10")
    assert done.returncode == 1 and report["slower"] == [
        "length_129 on port:other: in the baseline, not measured now",
        "length_129 on port:ctxscore.ports.numpy_port:scores: measured now, not in the baseline",
        "upstream_two_requests_rank0 on port:ctxscore.ports.numpy_port:scores: measured now, not in the baseline"], \
        report["slower"]
    for text, named in (("[1, 2]", "not a `ctxscore bench --json` report"), ("{", "not JSON"),
                        ('{"rows": [{"case": "length_129", "backend": "reference", "median_us": -1}]}', "median_us"),
                        ('{"rows": []}', "no rows"),
                        ('{"rows": [{"case": "length_129", "backend": "reference", "median_us": 5},'
                         ' {"case": "length_129", "backend": "reference", "median_us": 50}]}', "two rows for length_129")):
        baseline.write_text(text)
        bad = run("bench", *CASES, "--calls", "2", "--baseline", str(baseline), "--max-slowdown", "10")
        assert bad.returncode == 2 and named in bad.stderr, (text, bad.stderr)
    alone = run("bench", "--max-slowdown", "10")
    assert alone.returncode == 2 and "needs --baseline" in alone.stderr, alone.stderr
    for pct in ("nan", "inf", "-1", "5x"):  # a NaN bound would pass every comparison
        bad = run("bench", *CASES, "--calls", "2", "--baseline", str(baseline), "--max-slowdown", pct)
        assert bad.returncode == 2 and "expected a finite percentage" in bad.stderr, (pct, bad.stderr)


@pytest.mark.parametrize("behaviour, named", [
    ("timing_zero", 'median_us = "0", expected a finite number > 0'),
    ("timing_fewer_calls", 'calls = "4", expected a finite number >= 5'),
    ("timing_longer_than_the_wait", "calls at a median of 1000000 us take at least 3 s, expected no more than the")])
def test_timing_figures_no_measurement_gives_are_refused(run, behaviour, named):
    here = os.path.dirname(os.path.abspath(__file__))
    broken = os.path.join(here, "..", "property_tests", "ports", "broken_port.py")
    words = ["env", "PYTHONPATH=" + os.path.join(here, "..", "python"), sys.executable, broken, behaviour]
    done, report = bench(run, "--port", " ".join(shlex.quote(w) for w in words))
    assert done.returncode != 0 and report is None, done.stdout
    assert named in done.stderr and f"broken:{behaviour}" in done.stderr, done.stderr
