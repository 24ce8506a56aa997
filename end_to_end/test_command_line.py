"""The command line as a user meets it: defaults that work, bad input named
with exit status 2, and every replay line it prints reproducing its failure
when run exactly as printed."""
import json
import os
import re
import shlex
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from conftest import SOURCE

REPLAY = re.compile(r"\(replay: (.+)\)$")
DRAWN_AGAIN = re.compile(r"drawn case again: (.+)$")
CORPUS_FILE = os.path.join(SOURCE, "fixtures", "corpus", "length_129.safetensors")


def replay_lines(text):
    lines = []
    for line in text.splitlines():
        for pattern in (REPLAY, DRAWN_AGAIN):
            m = pattern.search(line.strip())
            if m:
                lines.append(m.group(1))
    return lines


def run_as_printed(line, ctxscore_bin, cwd):
    """Runs a printed line through /bin/sh exactly as printed: with nothing
    on PATH but /usr/bin:/bin (it names the binary by its absolute path)."""
    assert os.path.isabs(shlex.split(line)[0]), line
    env = dict(os.environ, PATH="/usr/bin:/bin")
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def run_with_ctxscore_on_path(line, ctxscore_bin, cwd):
    """Runs a README line (`ctxscore ...`) through /bin/sh with the binary on PATH as `ctxscore`."""
    env = dict(os.environ, PATH=os.path.dirname(ctxscore_bin) + os.pathsep + os.environ["PATH"])
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_version_names_the_corpus_found_beside_the_binary(run):
    done = run("--version")
    assert done.returncode == 0, done.stderr
    version, corpus = done.stdout.strip().splitlines()
    assert re.fullmatch(r"ctxscore \d+\.\d+\.\d+", version)
    path = corpus.removeprefix("corpus: ")
    assert os.path.isdir(path) and any(f.endswith(".safetensors") for f in os.listdir(path)), corpus


def test_fixtures_check_defaults_to_out_given_and_to_the_installed_corpus(run):
    one = run("fixtures", "check", CORPUS_FILE, "--backend", "reference")
    assert one.returncode == 0, one.stdout + one.stderr
    assert "out: given 1" in one.stdout
    whole = run("fixtures", "check")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "failing" in whole.stdout and "result: every backend that ran passed" in whole.stdout


@pytest.mark.parametrize("args, names", [
    (["fixtures", "check", "--port", ""], "--port"),
    (["fuzz", "--port", "  "], "--port"),
    (["verify", "--port", ""], "--port"),
    (["fuzz", "--shard", "3/2"], "--shard"),
    (["fuzz", "--shard", "x"], "--shard"),
    (["fuzz", "--time-budget", "-1"], "--time-budget"),
    (["fuzz", "--no-such-flag"], "--no-such-flag"),
    (["fixtures", "check", "/nonexistent/fixtures"], "/nonexistent/fixtures"),
    (["fuzz", "--backend", "cuda"], "cuda"),
    (["fuzz", "--port-timeout", "nan"], "--port-timeout"),
    (["fuzz", "--time-budget", "inf"], "--time-budget"),
    (["fuzz", "--seed", "-1"], "--seed"),
    (["verify", "--seed", "1e3"], "--seed"),
    (["geometry", "--batch", "1", "--max-seq-len", "100", "--world", "0"], "--world: Value 0 not in range"),
    (["fuzz", "--out-mode", "sideways"], "expected given, absent or too_small"),
    (["verify", "--require", "cuda"], "--require"),
    (["fuzz", "--shard", " 1/2"], "--shard"),
    (["gate", "--shard", "1/2 "], "--shard"),
    (["fuzz", "--port-timeout", "1e-9"], "--port-timeout"),
    (["gate", "--port-startup-timeout", "0.0001"], "--port-startup-timeout"),
    (["fuzz", "--failures", "/proc/no-such-folder"], "--failures"),
    (["gate", "--check", "speed"], "speed"),
    (["gate", "--require", "everything"], "everything"),
    (["gate"], "--port: the gate was not told what to judge"),
    (["gate", "--cases", "5"], "--port: the gate was not told what to judge"),
    (["fuzz", "--shard", "1/2"], "--shard 1/2 needs --seed"),
    (["gate", "--backend", "reference", "--shard", "2/4"], "--shard 2/4 needs --seed"),
    (["fuzz", "--cases", "1", "--min-cases", "5"], "--min-cases: 5 is more than the 1 cases asked"),
    (["gate", "--backend", "reference", "--check", "fuzz", "--cases", "1", "--min-cases", "5"], "--min-cases"),
    (["fuzz", "--junit", ""], "--junit: an empty path"),
    (["fuzz", "--backend", "reference", "--port", "python3 -c pass"], "--backend reference with --port"),
    (["fixtures", "check", "--capture", "--backend", "reference"], "--capture: backend reference records no graph"),
    (["fuzz", "--cases", " 5"], '--cases: " 5", expected a decimal integer'),
    (["fuzz", "--cases", "0x10"], '--cases: "0x10", expected a decimal integer'),
    (["gate", "--backend", "reference", "--require", "bogus"], '--require: no check "bogus"'),
    (["gate", "--backend", "reference", "--check", "bogus"], '--check: no check "bogus"'),
    (["fuzz", "--max-failures", "-1"], '--max-failures: "-1", expected a decimal integer from 0 to 1099511627776'),
    (["frobnicate"], 'no command "frobnicate"'),
])
def test_bad_usage_exits_2_naming_what_was_wrong(run, args, names):
    done = run(*args)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert names in done.stderr
    assert "reference" not in done.stdout  # nothing was judged


@pytest.mark.parametrize("mode", ["given", "absent", "too_small"])
def test_every_replay_line_of_a_failing_fuzz_case_reproduces_it(run, port_command, ctxscore_bin, tmp_path, mode):
    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    done = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small", "--out-mode", mode,
               "--max-failures", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = replay_lines(done.stderr)
    assert len(lines) == 2, done.stderr  # the shrunk fixture's check, and the drawn case again
    assert any(re.match(r"/\S+/ctxscore fixtures check /", line) for line in lines), lines
    for line in lines:
        again = run_as_printed(line, ctxscore_bin, tmp_path)
        assert again.returncode == 1, (line, again.stdout, again.stderr)
        assert "FAIL" in again.stdout + again.stderr, line
        assert f"out {mode}" in again.stdout + again.stderr, line


def test_every_replay_line_of_a_failing_fixture_reproduces_it(run, port_command, ctxscore_bin, tmp_path):
    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    done = run("fixtures", "check", "--port", planted, "--out-mode", "all")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = replay_lines(done.stdout)
    assert lines and all(re.match(r"/\S+/ctxscore fixtures check /", line) for line in lines), done.stdout
    for line in lines:
        again = run_as_printed(line, ctxscore_bin, tmp_path)
        assert again.returncode == 1 and "FAIL" in again.stdout, (line, again.stdout, again.stderr)


def test_the_readmes_replay_examples_reproduce_a_failure(run, port_command, ctxscore_bin, tmp_path):
    """The README's block under "Replaying a failure", with FIXTURE and PORT filled in."""
    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    done = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small", "--out-mode", "given",
               "--max-failures", "1")
    fixture = re.search(r"fixture: (/\S+\.safetensors)", done.stderr).group(1)
    readme = open(os.path.join(SOURCE, "README.md")).read()
    block = re.search(r"## Replaying a failure\n.*?```\n(.*?)```", readme, re.S).group(1)
    examples = [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("ctxscore ")]
    assert len(examples) >= 2, block
    for example in examples:
        line = example.replace("FIXTURE", fixture).replace("PORT", "'" + planted.replace("'", "'\\''") + "'")
        again = run_with_ctxscore_on_path(line, ctxscore_bin, tmp_path)
        if "--capture" in example:  # the numpy port records no graph: bad usage, not a failing kernel
            assert again.returncode == 2 and "--capture: backend port records no graph" in again.stderr, (line, again.stderr)
            continue
        assert again.returncode == 1 and "FAIL" in again.stdout + again.stderr, (line, again.stdout, again.stderr)


def test_a_malformed_environment_value_is_bad_input(run):
    done = run("fuzz", "--cases", "1", env={"CTXSCORE_PORT_TIMEOUT": "abc"})
    assert done.returncode == 2 and 'CTXSCORE_PORT_TIMEOUT = "abc"' in done.stderr, done.stderr


def test_junit_into_a_directory_is_refused_and_leaves_nothing(run, tmp_path):
    target = tmp_path / "reports"
    target.mkdir()
    done = run("fuzz", "--cases", "1", "--junit", str(target))
    assert done.returncode == 2 and "--junit" in done.stderr, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["reports"] and not os.listdir(target)


def test_control_bytes_from_files_reach_the_terminal_escaped(run, tmp_path):
    hostile = tmp_path / "x\x1b[2J\x07.safetensors"
    hostile.write_bytes(b"\x10" + b"\x00" * 7 + b'{"\x1b[31m": 1}')
    done = run("fixtures", "check", str(hostile), "--backend", "reference")
    assert done.returncode == 2, done.stdout + done.stderr  # a malformed fixture is bad input
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    assert "\\x1b" in done.stdout


def test_port_workers_given_garbage_say_so_in_one_line(ctxscore_bin):
    tools = os.path.dirname(ctxscore_bin)
    workers = [[os.path.join(tools, "ctxscore-native-port"), os.path.join(tools, "libctxscore_reference_port.so")],
               [sys.executable, "-m", "ctxscore.port", "ctxscore.ports.numpy_port:scores", "--tensors", "numpy"]]
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"))
    for worker in workers:
        for garbage in (b"hello world, this is not the protocol\n", b"\x10" + b"\0" * 7 + b"notjson!notjson!"):
            done = subprocess.run(worker, input=garbage, capture_output=True, env=env, timeout=60)
            err = done.stderr.decode()
            assert done.returncode == 2, (worker, done.returncode, err)
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_port_that_ignores_sm_scale_fails_fuzz_and_the_corpus(run, port_command):
    planted = port_command("ctxscore.ports.numpy_port:ignores_sm_scale")
    fuzzed = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small", "--max-failures", "1")
    assert fuzzed.returncode == 1, fuzzed.stdout + fuzzed.stderr
    shrunk = re.search(r"shrunk: (Case\{.*\})", fuzzed.stderr).group(1)
    assert "sm_scale=0.088388347648318447" not in shrunk, shrunk  # the shrunk case keeps another scale
    checked = run("fixtures", "check", "--port", planted)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    failing = re.findall(r"^FAIL\s+(\S+)", checked.stdout, re.M)
    assert set(failing) == {"sm_scale_negative.safetensors", "sm_scale_one_sixteenth.safetensors"}, failing
    assert "BAD" not in checked.stdout


def test_the_corpus_is_what_the_registry_generates(run, tmp_path):
    done = run("fixtures", "generate", "--out", str(tmp_path / "corpus"))
    assert done.returncode == 0, done.stdout + done.stderr
    committed = os.path.join(SOURCE, "fixtures", "corpus")
    names = sorted(os.listdir(committed))
    assert sorted(os.listdir(tmp_path / "corpus")) == names
    for name in names:
        with open(os.path.join(committed, name), "rb") as a, open(tmp_path / "corpus" / name, "rb") as b:
            assert a.read() == b.read(), f"{name} differs from what the registry generates"


def test_geometry_at_a_hand_computed_point(run):
    done = run("geometry", "--batch", "8", "--max-seq-len", "131072", "--world", "4", "--json")
    assert done.returncode == 0, done.stderr
    g = json.loads(done.stdout)
    # G = 131072 / 128; L = G / 4; 2^14 / 8 programs per request cap the count at ceil(256 / 3) = 86, CHUNK 4.
    assert (g["global_blocks"], g["local_slots"], g["chunk_count"], g["chunk"], g["grid"], g["tile_n"]) == \
        (1024, 256, 86, 4, [8, 64], 16), g


def test_fixtures_check_reports_junit_and_json(run, tmp_path):
    corpus = os.path.join(SOURCE, "fixtures", "corpus")
    n = len([f for f in os.listdir(corpus) if f.endswith(".safetensors")])
    done = run("fixtures", "check", corpus, "--backend", "reference", "--out-mode", "all",
               "--junit", str(tmp_path / "junit.xml"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is True
    suite = ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("errors")) == \
        ("reference.corpus", str(3 * n), "0", "0")


def test_verify_requires_what_it_is_told_to(run):
    plain = run("verify", "--reference-cases", "5", "--hip-cases", "5")
    required = run("verify", "--reference-cases", "5", "--hip-cases", "5", "--require", "reference")
    assert plain.returncode == 0 and required.returncode == 0, plain.stdout + required.stdout
    if "not available: hip" in plain.stdout:  # a machine without a GPU: requiring the kernel fails, by name
        missing = run("verify", "--reference-cases", "5", "--hip-cases", "5", "--require", "hip")
        assert missing.returncode == 1, missing.stdout
        assert "REQUIRED but not available: hip" in missing.stdout
        assert missing.stdout.rstrip().endswith("result: FAILED")


def test_a_nonrepeatable_port_fails_fuzz_repeat_and_its_replay_line_repeats(run, port_command, ctxscore_bin, tmp_path):
    planted = port_command("ctxscore.ports.numpy_port:sum_order_per_call")
    once = run("fuzz", "--port", planted, "--cases", "20", "--case-size", "small")
    assert once.returncode == 0, once.stdout + once.stderr  # within the bound on every single call
    done = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small", "--repeat", "3", "--max-failures", "1",
               "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not repeatable: call " in done.stderr, done.stderr
    failing = json.loads(done.stdout)["suites"][0]["failing"]
    assert [row["kind"] for row in failing] == ["not_repeatable"], done.stdout
    assert failing[0]["details"]["calls"] == "3" and int(failing[0]["details"]["call"]) in (2, 3), failing
    assert failing[0]["details"]["first_difference"] in failing[0]["message"], failing
    lines = replay_lines(done.stderr)
    assert lines and all("--repeat 3" in line for line in lines), lines
    again = run_as_printed(lines[0], ctxscore_bin, tmp_path)
    assert again.returncode == 1 and "not repeatable" in again.stdout, (lines[0], again.stdout, again.stderr)


def test_reports_and_failure_fixtures_name_the_toolchain(run, port_command, tmp_path):
    sys.path.insert(0, os.path.join(SOURCE, "python"))
    from ctxscore.fixture import read

    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    junit = tmp_path / "report.xml"
    done = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small", "--max-failures", "1",
               "--json", "--junit", str(junit))
    assert done.returncode == 1, done.stdout + done.stderr
    numpy_version = re.compile(r"python [0-9.]+; numpy [0-9.]+")
    suite = json.loads(done.stdout)["suites"][0]
    assert numpy_version.search(suite["toolchain"]), suite
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(junit).iter("property")}
    assert numpy_version.search(properties["toolchain"]), properties
    failing = suite["failing"][0]
    fixture = failing["fixture"]
    assert failing["where"] == f"{fixture} (replay: {failing['replay']})" and failing["replay_reproduces"], failing
    assert failing["kind"] == "mismatch" and failing["details"] == {}, failing  # a mismatch's particulars are its report
    assert shlex.split(failing["replay"]) == [failing["replay_program"], "fixtures", "check", fixture,
                                              *shlex.split(failing["replay_flags"])], failing
    assert numpy_version.search(read(fixture).toolchain), fixture
    text = run("fuzz", "--cases", "2")
    assert re.search(r"toolchain: the reference, host code built by (g\+\+|clang) ", text.stdout), text.stdout


def test_junit_stays_valid_xml_whatever_bytes_a_name_holds(run, tmp_path):
    """A file name with invalid UTF-8 and control bytes: the JUnit file still parses, the bytes replaced."""
    folder = tmp_path / "fixtures"
    folder.mkdir()
    hostile = os.path.join(os.fsencode(folder), b"bad\xff\xfe\x01name.safetensors")
    with open(hostile, "wb") as f:
        f.write(b"\x10" + b"\x00" * 7 + b'{"a": 1}')
    junit = tmp_path / "report.xml"
    done = run("fixtures", "check", str(folder), "--backend", "reference", "--junit", str(junit))
    assert done.returncode == 2, done.stdout + done.stderr
    root = ElementTree.parse(junit).getroot()
    names = [case.get("name") for case in root.iter("testcase")]
    assert any(name.startswith("bad\ufffd\ufffd\ufffdname") for name in names), names



def test_a_port_on_the_host_is_fuzzed_at_case_size_small_unless_told(run, port_command):
    """A CPU port at the GPU's sizes took 33 s for 5 cases: its hello names its device, and a port on
    `cpu` takes small, which the line that draws a failing case again names."""
    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    done = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--max-failures", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    again = [line for line in done.stderr.splitlines() if "drawn case again:" in line]
    assert again and all("--case-size small" in line for line in again), done.stderr


def test_one_value_bug_is_told_once_under_the_check_that_owns_it(run, port_command):
    """Scores off the reference fail fuzz; repeatability and batch_invariance meet them again before
    their own claims (bits across calls, across batches) and say whose mismatch it is, still failing."""
    planted = port_command("ctxscore.ports.numpy_port:cutoff_slack_one")
    done = run("gate", "--port", planted, "--check", "fuzz", "--check", "repeatability", "--check", "batch_invariance",
               "--seed", "1", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    suites = {s["suite"]: s for s in json.loads(done.stdout)["suites"]}
    assert suites["fuzz"]["status"] == "FAILED" and suites["fuzz"]["same_mismatch_as"] == "", suites["fuzz"]
    for name in ("repeatability", "batch_invariance"):
        assert suites[name]["status"] == "FAILED" and suites[name]["same_mismatch_as"] == "fuzz", suites[name]
        assert "that fuzz reports, met again before its own claim was judged" in suites[name]["summary"]
    # A check's own claim broken is its own failure, whatever failed before it.
    own = run("gate", "--port", port_command("ctxscore.ports.numpy_port:sum_order_per_call"), "--check", "fuzz",
              "--check", "repeatability", "--seed", "1", "--json")
    suites = {s["suite"]: s for s in json.loads(own.stdout)["suites"]}
    assert suites["repeatability"]["status"] == "FAILED" and suites["repeatability"]["same_mismatch_as"] == "", suites


def test_the_guide_prints_the_readme_and_where_the_documents_are(run):
    done = run("guide")
    assert done.returncode == 0 and done.stdout.startswith("# ctxscore"), done.stderr
    listed = [line.strip() for line in done.stdout.split("Installed beside this binary:")[1].splitlines() if line.strip()]
    assert [os.path.basename(f) for f in listed] == ["README.md", "CONTRACT.md", "FORMAT.md", "PROTOCOL.md", "native_port.h",
                                                     "corpus", "recipes"]
    assert all(os.path.exists(f) for f in listed), listed


def test_timings_say_where_each_checks_seconds_went(run, port_command):
    """--timings and the JSON report split a check's seconds into phases: the port's own calls (the seconds
    its replies state) apart from the pipe, the reference and the judge; the phases never add up past the
    check's own seconds."""
    port = port_command("ctxscore.ports.numpy_port:scores")
    done = run("gate", "--port", port, "--check", "fuzz", "--check", "large_batches", "--seed", "3", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    for suite in json.loads(done.stdout)["suites"]:
        phases = suite["seconds_by_phase"]
        assert list(phases) == ["setup", "reference", "implementation", "transfer", "judge", "harness"], phases
        assert all(v >= 0 for v in phases.values()), phases
        assert sum(phases.values()) == pytest.approx(suite["seconds"], abs=1e-3), (phases, suite["seconds"])
        assert phases["implementation"] > 0 and phases["reference"] > 0 and phases["transfer"] > 0, phases
    table = run("gate", "--port", port, "--check", "fuzz", "--seed", "3", "--timings")
    assert table.returncode == 0, table.stdout + table.stderr
    rows = table.stdout.split("where the time went (seconds):\n")[1].splitlines()
    assert rows[0].split() == ["check", "seconds", "setup", "reference", "implementation", "transfer", "judge",
                               "harness"], rows
    assert rows[1].split()[0] == "fuzz" and len(rows[1].split()) == 8, rows


@pytest.mark.parametrize("function, fail_fast", [("scores", False), ("cutoff_slack_one", True),
                                                 ("sum_order_per_call", True)])
def test_checks_side_by_side_report_what_one_lane_reports(run, port_command, function, fail_fast):
    """--jobs N runs the checks over N port processes: the report (checks in order, verdicts, cases, seeds,
    which check a fail-fast gate stopped at) is the one-lane report, whichever lane finished first."""
    port = port_command(f"ctxscore.ports.numpy_port:{function}")
    reports = {}
    for jobs in ("1", "3"):
        done = run("gate", "--port", port, "--seed", "5", "--jobs", jobs, "--json", *(["--fail-fast"] if fail_fast else []))
        assert done.returncode == (1 if function != "scores" else 0), done.stdout + done.stderr
        reports[jobs] = [(s["suite"], s["status"], s["calls"], s["failures"], s["seed"], s["not_run"],
                          s["same_mismatch_as"]) for s in json.loads(done.stdout)["suites"]]
    assert reports["1"] == reports["3"], reports
    if fail_fast:
        statuses = [status for _, status, *_ in reports["1"]]
        assert statuses.count("FAILED") == 1, reports["1"]
        after = statuses[statuses.index("FAILED") + 1:]
        assert after and all(not_run.startswith("the gate stopped at the first failing check")
                             for *_, not_run, _ in reports["1"][len(statuses) - len(after):]), reports["1"]
