"""The gate as a kernel author meets it from an installed package: a test
file alone in an empty folder, the source tree out of reach. `write(folder)`
puts it there as test_gate.py, with the CPU planted ports of
tools/mutants/ports.txt written into it; `python3 installed_gate.py FOLDER`
does the same for scripts (ci/package). In that file:
- the default gate passes the numpy and torch ports, every check judging
  at least the cases it was asked for;
- the check each planted port's line names fails that port, with its shrunk
  case, its fixture under the test's temporary directory and a replay line
  that runs as printed with nothing on PATH but the system's;
- a budget that judges too little fails the gate;
- a device the torch port cannot open is an environment problem, no verdict.
Its tests that need torch have "torch" in their names (`-k "not torch"`
deselects them where torch is not installed)."""
import os
import sys
import textwrap

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GATE_TESTS = textwrap.dedent('''
    import os
    import re
    import shlex
    import subprocess

    import pytest

    from ctxscore.pytest_plugin import EnvironmentProblem, gate

    # (check, function): the CPU planted ports of tools/mutants/ports.txt that the default gate must fail.
    PLANTED = PLANTED_PORTS
    # Checks that judge named cases: their failures name no drawn case.
    NAMED_CASE_CHECKS = ("corpus", "large_batches")


    @pytest.mark.parametrize("function, tensors", [("ctxscore.ports.numpy_port:scores", "numpy"),
                                                   ("ctxscore.ports.torch_port:scores", "torch")])
    def test_the_default_gate_passes_a_correct_port(function, tensors):
        report = gate(function, tensors=tensors)
        statuses = {s["suite"]: s["status"] for s in report["suites"]}
        print(statuses)
        for check in ("fuzz", "repeatability", "batch_invariance", "shard_columns", "selection", "corpus"):
            assert statuses[check] == "passed", statuses
        assert all(s["calls"] >= s["min_cases"] > 0 for s in report["suites"] if s["status"] == "passed"), report


    # Each check draws its cases from (seed, check, case number) alone, so the
    # named check run by itself judges what it judges inside the default gate.
    @pytest.mark.parametrize("check, function", PLANTED)
    def test_the_check_named_for_a_planted_bug_fails_it(check, function, tmp_path):
        with pytest.raises(pytest.fail.Exception) as failed:
            gate(function, tensors="numpy", checks=[check])
        text = str(failed.value)
        print(text)
        assert f"\\n{check} FAILED: " in text, text
        text = text.split(f"\\n{check} FAILED: ", 1)[1].split("\\n\\n", 1)[0]  # that check's part
        fixture = re.search(r"fixture: (\\S+\\.safetensors)", text).group(1)
        assert os.path.isabs(fixture) and os.path.isfile(fixture), fixture
        if check != "corpus":  # a corpus failure names the installed corpus's own fixture
            assert fixture.startswith(str(tmp_path) + os.sep), fixture
        # The replay line runs as printed, with nothing on PATH but the system's.
        line = re.search(r"\\((?:replay|one call again): (.+)\\)$", text, re.M).group(1)
        assert os.path.isabs(shlex.split(line)[0]), line
        again = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=dict(os.environ, PATH="/usr/bin:/bin"),
                               cwd=tmp_path)
        assert again.returncode in (0, 1) and "result:" in again.stdout, (line, again.stdout, again.stderr)
        if check in ("fuzz",) + NAMED_CASE_CHECKS:  # one call shows the bug: the fixture's replay fails too
            assert again.returncode == 1, (line, again.stdout)
        assert re.search(r"in process: env PYTHONPATH=\\S+ \\S+ -m ctxscore.check /\\S+ --impl ", text), text
        if check in NAMED_CASE_CHECKS:  # its cases are the registry's, not drawn: the fixture is the case
            assert "drawn case again" not in text, text
            return
        # The drawn case again fails the check again, whatever its claim spans.
        drawn = re.search(r"drawn case again: (.+)$", text, re.M).group(1)
        again = subprocess.run(["sh", "-c", drawn], capture_output=True, text=True, env=dict(os.environ, PATH="/usr/bin:/bin"),
                               cwd=tmp_path)
        assert again.returncode == 1 and re.search(rf"^port +{check} +1 +1 ", again.stdout, re.M), (drawn, again.stdout)


    def test_a_budget_that_judges_too_little_fails_the_gate():
        with pytest.raises(pytest.fail.Exception) as failed:
            gate("ctxscore.ports.numpy_port:scores", tensors="numpy", time_budget=0.5)
        assert "it must judge" in str(failed.value), str(failed.value)


    def test_a_device_the_torch_port_cannot_open_is_no_verdict_on_the_kernel(tmp_path):
        with pytest.raises(EnvironmentProblem) as raised:
            gate("ctxscore.ports.torch_port:scores", tensors="torch", device="cuda:99", failures=str(tmp_path / "f"))
        assert "cannot open" in str(raised.value), str(raised.value)
        assert not (tmp_path / "f").exists() or not os.listdir(tmp_path / "f")
''')


def planted_ports():
    """The CPU lines of tools/mutants/ports.txt whose killer is a check of the default gate."""
    lines = open(os.path.join(SOURCE, "tools", "mutants", "ports.txt")).read().splitlines()
    rows = [line.split() for line in lines if line.startswith("cpu ")]
    return [(killer, fn) for _, killer, fn, *_ in rows if "." not in killer and killer != "large_offsets"]


def write(folder):
    """Writes test_gate.py into `folder`; returns its path."""
    path = os.path.join(folder, "test_gate.py")
    with open(path, "w") as f:
        f.write(GATE_TESTS.replace("PLANTED_PORTS", repr(planted_ports())))
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: python3 installed_gate.py FOLDER (an existing folder)")
    print(write(sys.argv[1]))
