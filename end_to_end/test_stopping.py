"""A run stopped early still reports: SIGTERM, SIGINT, SIGHUP and SIGQUIT
end it with the report of the cases judged so far, its JUnit file and exit
status 3, and leave no port process behind (nor a daemon the port started)
and no temporary file; SIGKILL of the harness takes its port with it; a time budget ends it cleanly, but a check that
judged fewer cases than asked fails unless a lower floor is named; away
from a terminal a progress line comes about every 10 s."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import SOURCE


def no_process_left(marker):
    """No process whose command line holds `marker` (the port's unique argument) is left."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().split()[2] != "Z":
                            return False
        except OSError:
            continue
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_a_signal_ends_the_run_with_a_report_a_junit_file_and_exit_3(ctxscore_bin, port_command, tmp_path, sig):
    marker = f"--name=slow-{sig.name}-{os.getpid()}"
    slow = port_command("slow_port:scores", marker)
    junit, temp = tmp_path / "report.xml", tmp_path / "tmp"
    temp.mkdir()
    p = subprocess.Popen([ctxscore_bin, "fuzz", "--port", slow, "--cases", "1000", "--case-size", "small",
                          "--junit", str(junit)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         env=dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures"), SLOW_PORT_CHILD_TAG=marker,
                                  TMPDIR=str(temp)))
    time.sleep(2)
    assert not no_process_left(marker)  # the port and its daemon run
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, (p.returncode, out, err)
    m = re.search(r"stopped early: interrupted by (\w+) after (\d+) judged", out)
    assert m and m.group(1) == sig.name and int(m.group(2)) >= 1, out + err
    assert "result: INTERRUPTED" in out
    xml = junit.read_text()
    assert 'name="stopped"' in xml and "<testcase" in xml
    assert not (tmp_path / "report.xml.partial").exists()
    assert "interrupted by signal" in xml and "<error" in xml  # a reader of the file alone sees no pass
    assert no_process_left(marker)
    assert os.listdir(temp) == []  # the port's stderr file was unlinked as soon as it was open


def test_the_json_report_of_an_interrupted_run_says_it_is_not_ok(ctxscore_bin, port_command, tmp_path):
    """A dashboard or a merge of shard reports reads the JSON, not the exit status."""
    slow = port_command("slow_port:scores")
    p = subprocess.Popen([ctxscore_bin, "gate", "--port", slow, "--check", "fuzz", "--cases", "1000", "--case-size", "small",
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         env=dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures")))
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, (p.returncode, out, err)
    report = json.loads(out)
    assert report["ok"] is False and report["interrupted_by"] == signal.SIGINT, report
    assert all(s["failures"] == 0 for s in report["suites"]), report  # nothing failed: the interruption alone says not ok


def test_a_killed_harness_takes_its_port_with_it(ctxscore_bin, tmp_path):
    """SIGKILL leaves the harness no moment to end its port: the port dies
    with it (PR_SET_PDEATHSIG), even one that never reads its stdin."""
    marker = str(900000 + os.getpid() % 99999)
    temp = tmp_path / "tmp"
    temp.mkdir()
    p = subprocess.Popen([ctxscore_bin, "fuzz", "--port", f"sleep {marker}", "--cases", "10", "--case-size", "small"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures"), TMPDIR=str(temp)))
    deadline = time.time() + 10
    while no_process_left(f"sleep\0{marker}") and time.time() < deadline:
        time.sleep(0.1)
    assert not no_process_left(f"sleep\0{marker}")  # the port runs, waiting for nothing
    p.kill()
    p.communicate(timeout=10)
    deadline = time.time() + 5
    while not no_process_left(f"sleep\0{marker}") and time.time() < deadline:
        time.sleep(0.1)
    assert no_process_left(f"sleep\0{marker}")
    assert os.listdir(temp) == []


@pytest.mark.parametrize("shape", ["quoted_semicolon", "cd_and", "forked_child", "setsid_daemon"])
def test_a_killed_harness_leaves_no_process_of_any_command_line_shape(ctxscore_bin, tmp_path, shape):
    """However the command line starts its processes (a shell left between the harness and the port, a
    child the port forks, a setsid() daemon), none outlives a SIGKILL of the harness: the
    keeper between them outlives it, and ends them all."""
    marker = str(700000 + (os.getpid() * 7 + len(shape)) % 99999)
    py = shlex.quote(sys.executable)
    line = {"quoted_semicolon": f"{py} -c 'import time; time.sleep({marker})'",
            "cd_and": f"cd . && sleep {marker}",
            "forked_child": f"{py} -c 'import os, time; os.fork(); time.sleep({marker})'",
            "setsid_daemon": f"(setsid sleep {marker} &); sleep {marker}"}[shape]
    p = subprocess.Popen([ctxscore_bin, "fuzz", "--port", line, "--cases", "10", "--case-size", "small"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures")))

    def running():
        return sum(1 for pid in os.listdir("/proc") if pid.isdigit() and not no_process_left_in(pid, marker))
    deadline = time.time() + 10
    want = 2 if shape in ("forked_child", "setsid_daemon") else 1
    while running() < want and time.time() < deadline:
        time.sleep(0.1)
    assert running() >= want, shape  # the port (and its child or daemon) runs, waiting for nothing
    p.kill()
    p.communicate(timeout=10)
    deadline = time.time() + 5
    while not no_process_left(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert no_process_left(marker), shape


def test_a_port_flooding_stderr_costs_a_bounded_share_of_the_disk(ctxscore_bin, tmp_path):
    """A chatty port wrote 12 GiB of stderr in one run: the harness keeps only its tail on disk."""
    flood = (f"{shlex.quote(sys.executable)} -c 'import sys, time; [sys.stderr.write(\"x\" * (1 << 20)) for _ in range(400)]; "
             f"sys.stderr.flush(); time.sleep(600)'")
    p = subprocess.Popen([ctxscore_bin, "fuzz", "--port", flood, "--cases", "1", "--case-size", "small"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures")))
    try:
        path = None
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.5)
            fds = f"/proc/{p.pid}/fd"
            files = [os.path.join(fds, fd) for fd in os.listdir(fds) if "ctxscore-port-stderr" in os.readlink(os.path.join(fds, fd))]
            if files and os.stat(files[0]).st_size >= 400 << 20:
                path = files[0]
                break
        assert path, "the port did not write its 400 MiB"
        time.sleep(0.5)
        st = os.stat(path)
        assert st.st_size >= 400 << 20 and st.st_blocks * 512 < 16 << 20, (st.st_size, st.st_blocks * 512)
    finally:
        p.kill()
        p.communicate(timeout=30)


def no_process_left_in(pid, marker):
    """Whether process `pid` is gone, a zombie, or holds no `marker` in its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if marker.encode() not in f.read():
                return True
        with open(f"/proc/{pid}/stat") as s:
            return s.read().split()[2] == "Z"
    except OSError:
        return True


def test_a_time_budget_ends_the_run_cleanly_and_says_so(ctxscore_bin, port_command, tmp_path):
    slow = port_command("slow_port:scores")
    t0 = time.monotonic()
    done = subprocess.run([ctxscore_bin, "fuzz", "--port", slow, "--cases", "1000", "--case-size", "small",
                           "--time-budget", "12", "--min-cases", "1", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    suite = json.loads(done.stdout)["suites"][0]
    assert suite["stopped"].startswith("time budget of 12 s spent after"), suite["stopped"]
    assert 1 <= suite["calls"] < 1000 and len(suite["judged"]) == suite["calls"]
    assert took < 12 + 10, took  # one case past the budget at most, plus start and stop
    progress = [line for line in done.stderr.splitlines() if re.match(r"ctxscore: port fuzz: \d+ of 1000 cases", line)]
    assert progress, done.stderr  # stderr is a pipe here: a line about every 10 s


@pytest.mark.parametrize("command", [["fuzz"], ["gate"], ["fixtures", "check"]])
def test_a_budget_that_cuts_a_run_short_fails_it_unless_a_floor_is_named(ctxscore_bin, port_command, tmp_path, command):
    """Judging nothing is never a pass: a budget spent before the cases asked fails the run. The port is
    correct and slow (0.3 s a call), so that no machine judges every case asked within the budget."""
    correct = port_command("slow_port:scores")
    args = [ctxscore_bin, *command, "--port", correct, "--time-budget", "0.5", "--json"]
    args += [] if command[0] == "fixtures" else ["--cases", "100000", "--case-size", "small"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert not report["ok"] and any(s["status"] == "FAILED" and " it must judge" in s["summary"] for s in report["suites"]), report
    assert all(s["failures"] == 0 for s in report["suites"]), report  # the kernel is right: the floor failed it


def test_a_hung_port_costs_one_timeout_per_failing_case_and_is_not_shrunk(ctxscore_bin, tmp_path):
    """A port that never answers `score` is a verdict after one timeout: the
    case is recorded as drawn (each shrink step would cost another timeout),
    the report says so, and the run stops at that first failing case."""
    broken = os.path.join(SOURCE, "property_tests", "ports", "broken_port.py")
    port = " ".join(shlex.quote(w) for w in ["env", "PYTHONPATH=" + os.path.join(SOURCE, "python"), sys.executable,
                                              broken, "hang"])
    timeout = 3
    t0 = time.monotonic()
    done = subprocess.run([ctxscore_bin, "fuzz", "--port", port, "--cases", "50", "--case-size", "small",
                           "--port-timeout", str(timeout), "--failures", str(tmp_path / "f"), "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    took = time.monotonic() - t0
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a hung port: not shrunk" in done.stderr, done.stderr
    assert [row["kind"] for row in json.loads(done.stdout)["suites"][0]["failing"]] == ["hung"], done.stdout
    assert took < 2 * timeout + 10, took  # one timeout for the case, one at most for the port's restart, then start and stop
    assert len(list((tmp_path / "f").glob("*.safetensors"))) == 1, list((tmp_path / "f").iterdir())


@pytest.mark.parametrize("port, status, testcase, words", [
    ("exit 1", 2, "run", "did not start"),
    ("echo garbage; sleep 30", 2, "run", "did not start"),
    ("echo no device here >&2; exit 69", 4, "environment", "nothing was judged"),
    ("sleep 30", 3, "run", "interrupted by signal 15 before any report"),
])
def test_a_run_that_ends_in_an_error_before_any_report_still_writes_its_junit_file(ctxscore_bin, tmp_path, port, status,
                                                                                      testcase, words):
    """A port that dies at hello, speaks garbage, cannot open its device, or
    a signal while it starts: the exit status says so, and the JUnit file
    holds one error testcase saying why, for a CI that reads only the file."""
    junit = tmp_path / "report.xml"
    p = subprocess.Popen([ctxscore_bin, "gate", "--port", port, "--seed", "1", "--junit", str(junit)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    if status == 3:
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == status, (p.returncode, out, err)
    xml = junit.read_text()
    assert f'<testcase classname="ctxscore" name="{testcase}">' in xml and "<error" in xml and words in xml, xml
    assert not (tmp_path / "report.xml.partial").exists()
