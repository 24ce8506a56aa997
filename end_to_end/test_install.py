"""The paths a kernel author takes, away from this repository: `cmake
--install` into a prefix, and `pip wheel` + `pip install` of the Python
package into a target; then, from an unrelated directory holding only a
test file, with nothing on PATH that the install did not put there, the
default pytest gate passes the numpy and torch ports, and the check each
CPU planted port of tools/mutants/ports.txt names fails that port, with
its shrunk case, its fixture under the test's temporary directory and a
replay line that runs as printed; a budget that judges too little fails,
a device the port cannot open is an environment problem; nothing is
written anywhere else. And a C++ project of their own finds the installed
CMake package and judges a corpus fixture with its libraries."""
import glob
import os
import platform
import re
import subprocess
import sys
import textwrap

from conftest import SOURCE

SYSTEM_PATH = "/usr/bin:/bin"  # env and sh, which the port command line uses

GATE_TESTS = textwrap.dedent('''
    import os
    import re
    import shlex
    import subprocess

    import pytest

    from ctxscore.pytest_plugin import EnvironmentProblem, gate

    # (check, function): the CPU planted ports of tools/mutants/ports.txt that the default gate must fail.
    PLANTED = PLANTED_PORTS


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
        assert os.path.isabs(fixture) and os.path.isfile(fixture) and fixture.startswith(str(tmp_path) + os.sep), fixture
        # The replay line runs as printed, with nothing on PATH but the system's.
        line = re.search(r"\\(replay: (.+)\\)$", text, re.M).group(1)
        assert os.path.isabs(shlex.split(line)[0]), line
        again = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=dict(os.environ, PATH="/usr/bin:/bin"),
                               cwd=tmp_path)
        assert again.returncode in (0, 1) and "result:" in again.stdout, (line, again.stdout, again.stderr)
        if check == "fuzz":  # one call shows the bug: the fixture's replay fails too
            assert again.returncode == 1, (line, again.stdout)
        # The drawn case again fails the check again, whatever its claim spans.
        drawn = re.search(r"drawn case again: (.+)$", text, re.M).group(1)
        again = subprocess.run(["sh", "-c", drawn], capture_output=True, text=True, env=dict(os.environ, PATH="/usr/bin:/bin"),
                               cwd=tmp_path)
        assert again.returncode == 1 and re.search(rf"^port +{check} +1 +1 ", again.stdout, re.M), (drawn, again.stdout)
        assert re.search(r"in process: \\S+ -m ctxscore.check /\\S+ --impl ", text), text


    def test_a_budget_that_judges_too_little_fails_the_gate():
        with pytest.raises(pytest.fail.Exception) as failed:
            gate("ctxscore.ports.numpy_port:scores", tensors="numpy", time_budget=0.5)
        assert "it must judge" in str(failed.value), str(failed.value)


    def test_a_device_the_port_cannot_open_is_no_verdict_on_the_kernel(tmp_path):
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


def tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


def untracked_in_source():
    """Files in the source tree that git neither tracks nor ignores (what a stray write would add)."""
    done = subprocess.run(["git", "-C", SOURCE, "ls-files", "--others", "--exclude-standard"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def test_install_then_gate_from_an_unrelated_directory(build_dir, tmp_path):
    before = untracked_in_source()
    temp_failures_before = set(glob.glob("/tmp/ctxscore-failures*"))
    prefix, wheels, site = tmp_path / "prefix", tmp_path / "wheels", tmp_path / "site"
    work, home, basetemp = tmp_path / "work", tmp_path / "home", tmp_path / "basetemp"
    for d in (work, home):
        d.mkdir()
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)], check=True, capture_output=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), os.path.join(SOURCE, "python")],
                   check=True)
    wheel = glob.glob(str(wheels / "ctxscore-*.whl"))
    assert len(wheel) == 1 and wheel[0].endswith(f"-py3-none-linux_{platform.machine()}.whl"), wheel  # a platform wheel: it bundles the binary
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), wheel[0]], check=True)
    (work / "test_gate.py").write_text(GATE_TESTS.replace("PLANTED_PORTS", repr(planted_ports())))

    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSCORE_") and k not in ("PYTHONPATH", "PATH")}
    env.update(PATH=f"{prefix / 'bin'}:{site / 'bin'}:{SYSTEM_PATH}", HOME=str(home), PYTHONPATH=str(site),
               PYTHONDONTWRITEBYTECODE="1")

    def run(*args):
        return subprocess.run(list(args), capture_output=True, text=True, cwd=work, env=env, timeout=900)

    # The installed CLI and the package's console script each find their own corpus.
    for cli in ("ctxscore", str(site / "bin" / "ctxscore")):
        version = run(cli, "--version")
        assert version.returncode == 0, version.stderr
        corpus = version.stdout.splitlines()[1].removeprefix("corpus: ")
        assert os.path.isdir(corpus) and corpus.startswith(str(tmp_path)), version.stdout
    assert run(str(prefix / "bin" / "ctxscore"), "fixtures", "check").returncode == 0
    assert run(sys.executable, "-m", "ctxscore", "fixtures", "check").returncode == 0

    gated = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "--basetemp", str(basetemp),
                "test_gate.py")
    print(gated.stdout[-20000:])
    assert gated.returncode == 0, gated.stdout + gated.stderr
    expected = 2 + len(planted_ports()) + 2
    assert f"{expected} passed" in gated.stdout, gated.stdout
    shown = re.search(r"fixture: (\S+\.safetensors)", gated.stdout)
    assert shown and shown.group(1).startswith(str(basetemp)), gated.stdout

    # Nothing was written anywhere else.
    assert tree(work) == ["test_gate.py"], tree(work)
    assert tree(home) == [], tree(home)
    assert set(glob.glob("/tmp/ctxscore-failures*")) == temp_failures_before
    assert untracked_in_source() == before


def test_a_cmake_project_uses_the_installed_package(build_dir, tmp_path):
    prefix, build = tmp_path / "prefix", tmp_path / "build"
    steps = [
        ["cmake", "--install", build_dir, "--prefix", str(prefix)],
        ["cmake", "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "package_consumer"), "-B", str(build),
         "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"],
        ["cmake", "--build", str(build)],
        [str(build / "consumer")],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    assert done.stdout.startswith("consumer: upstream_two_requests_rank1: "), done.stdout  # exit 0: it matched
