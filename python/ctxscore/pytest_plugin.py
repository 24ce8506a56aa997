"""Gate a kernel from its own test suite: one call runs every check the
ctxscore harness knows (`ctxscore gate`) against the kernel through the port
protocol, and fails the calling test naming each check that failed, with
its shrunk case, its fixture's absolute path, the replay line and an
in-process replay for a debugger.

    from ctxscore.pytest_plugin import gate

    def test_indexer_context_scores():
        gate("my_kernels.indexer:indexer_context_scores", device="cuda")

Or one pytest item per check, so that "repeatability FAILED" shows in the
test list:

    import pytest
    from ctxscore.pytest_plugin import CHECKS, gate

    @pytest.mark.parametrize("check", CHECKS)
    def test_indexer_context_scores(check):
        gate("my_kernels.indexer:indexer_context_scores", device="cuda", checks=[check])

The harness binary is the one bundled with this package; `ctxscore=` or
$CTXSCORE_BIN overrides it, and `ctxscore` on PATH is the last resort.
Failing cases are written to `failures=`, else $CTXSCORE_FAILURE_DIR (keep
that folder as a CI artifact: pytest deletes old tmp_path folders), else
the test's own temporary directory (tmp_path) when this module is loaded
as a pytest plugin (it is, once the package is installed), else a fresh
temporary directory: never into the caller's working tree. Installed as a
pytest plugin, the same function is the fixture `ctxscore_gate`.
"""
import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings

import pytest

from .cli import binary as bundled_binary
from .wire_format import EXIT_STATUS, FAILURE_DIR_DEFAULT, FAILURE_DIR_VARIABLE


_current_request = None


class NotRunWarning(UserWarning):
    """A check the gate could not run here: pytest lists it among the
    warnings, so a quiet pass does not hide it (`require=` makes it fail)."""


class EnvironmentProblem(RuntimeError):
    """The machine lacks what the kernel needs (a device the port cannot
    open): nothing was judged, and this is no verdict on the kernel."""


@pytest.fixture(autouse=True)
def _ctxscore_current_test(request):
    """Remembers the running test, so that `gate` can write into its tmp_path."""
    global _current_request
    _current_request = request
    yield
    _current_request = None


def _harness(chosen):
    found = chosen or bundled_binary() or shutil.which("ctxscore")
    if not found:
        raise RuntimeError("no ctxscore binary: this install has none bundled (it was installed with "
                           "CTXSCORE_PYTHON_ONLY=1); set CTXSCORE_BIN or pass ctxscore=")
    return os.path.abspath(found) if os.path.exists(found) else found


@functools.lru_cache(maxsize=None)
def _listed_checks(binary):
    done = subprocess.run([binary, "gate", "--list", "--json"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"`{binary} gate --list --json` exited with status {done.returncode}: {done.stderr.strip()}")
    return tuple(check["name"] for check in json.loads(done.stdout))


def __getattr__(name):
    """CHECKS: the checks, in the order the gate runs them, as the harness's
    registry lists them (`ctxscore gate --list` says what each catches)."""
    if name == "CHECKS":
        return _listed_checks(_harness(None))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _failure_dir(failures):
    """Where failing cases go, and whether it is a temporary folder of the gate's own."""
    if failures:
        return os.path.abspath(failures), False
    if os.environ.get(FAILURE_DIR_VARIABLE):
        return os.path.abspath(os.environ[FAILURE_DIR_VARIABLE]), False
    if _current_request is not None:
        return str(_current_request.getfixturevalue("tmp_path") / FAILURE_DIR_DEFAULT), False
    return tempfile.mkdtemp(prefix=FAILURE_DIR_DEFAULT + "-"), True


def _python_path():
    """This package, the caller's folder and its PYTHONPATH: where the port
    and the in-process replay find `function`, from any folder."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.pathsep.join([here, os.getcwd()] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))


def _port_command(function, device, tensors, geometry):
    cmd = ["env", "PYTHONPATH=" + _python_path(), sys.executable, "-m", "ctxscore.port", function, "--device", device]
    if tensors:
        cmd += ["--tensors", tensors]
    if geometry:
        cmd += ["--geometry", geometry]
    return " ".join(shlex.quote(c) for c in cmd)


def _in_process_replay(fixture, function, device, tensors):
    cmd = ["env", "PYTHONPATH=" + _python_path(), sys.executable, "-m", "ctxscore.check", fixture, "--impl", function,
           "--device", device]
    if tensors:
        cmd += ["--tensors", tensors]
    return " ".join(shlex.quote(c) for c in cmd)


def _failures(report, function, device, tensors):
    lines = []
    failed = [s for s in report.get("suites", []) if not s.get("ok")]
    lines.append("failed: " + ", ".join(s["suite"] for s in failed))
    if report.get("interrupted_by"):
        lines.append(f"interrupted by signal {report['interrupted_by']}: the run is no pass, whatever it judged")
    for suite in failed:
        lines.append(f"\n{suite['suite']} FAILED: {suite.get('summary', '')}")
        if suite.get("same_mismatch_as"):
            continue  # the check that owns that mismatch shows its case
        for row in suite.get("failing", [])[:2]:
            lines.append(f"  {row['name']}: {row['message']}")
            if row.get("case"):
                lines.append(f"  case: {row['case']}")
            if row.get("where"):
                lines.append(f"  fixture: {row['where']}")
            if row.get("fixture"):
                lines.append(f"  in process: {_in_process_replay(row['fixture'], function, device, tensors)}")
    lines.append("\nthe mismatch kinds and how to replay a failure: the ctxscore README, \"Reading a failure\"")
    return "\n".join(lines)


def _progress(line):
    """A line while the gate runs: on the terminal past pytest's capture
    (its terminal reporter), else on stderr."""
    reporter = _current_request.config.pluginmanager.get_plugin("terminalreporter") if _current_request else None
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line, file=sys.stderr, flush=True)


def _run_reporting_progress(cmd, env):
    """Runs the gate, passing on its one line per check as it ends; returns (exit status, stdout, stderr)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        out = []
        reader = threading.Thread(target=lambda: out.append(p.stdout.read()))
        reader.start()
        err = []
        for line in p.stderr:
            err.append(line)
            if line.startswith("ctxscore gate: "):
                _progress(line.rstrip("\n"))
        reader.join()
        return p.wait(), "".join(out), "".join(err)


def gate(function, *, checks=None, require=None, cases=None, device="cpu", tensors=None, geometry=None, case_size=None,
         corpus=None, seed=None, min_cases=None, max_failures=1, timeout=60, compile_keys=None, time_budget=None,
         failures=None, ctxscore=None, fail_fast=False, junit=None, shard=None, jobs=None):
    """Runs every check of the harness (or `checks`) against `function`
    ("module:function", upstream's signature) and fails the calling test
    naming each check that failed. Returns the report (a dict) on a pass.

    cases: fuzz's cases (default 200, `ctxscore gate`'s); the other drawn
    checks take a share of them.
    tensors: what `function` receives: "torch" (the default where torch
    imports) or "numpy" (host arrays, so device="cpu" only).
    case_size: small (default on the CPU), large (default elsewhere) or m3.
    seed: pins the cases; by default each run draws new ones and prints its seed.
    min_cases: a check that judged fewer cases fails (default: every case
    asked, so a time budget can cut a run short but never pass it on nothing).
    compile_keys: the drawn cases come from at most this many (default 8,
    `ctxscore gate`'s) (H, QL, world, rank, CHUNK, N, sm_scale) sets, so a
    kernel that specializes on them compiles a few times (0: unlimited);
    shrinking leaves them.
    time_budget: seconds for the whole gate, shared among the checks that will run.
    require: checks for which "not run" (capture on a CPU port, say) fails.
    fail_fast: stop at the first failing check (the others report "not run").
    junit: also write a JUnit XML report (a testcase per check) to this path.
    shard: "K/N", this job's share of one campaign over N jobs; needs seed=,
    so that the N jobs draw from one seed.
    jobs: checks run side by side, each port process of `jobs` taking the
    next (default 2 on the CPU where the machine has 2 cores, else 1); the
    report is the same, in the same order.
    A line per check is shown as the gate runs.
    A check that could not run here (capture on a CPU port, say) passes
    with a warning that names it and says why.
    Raises EnvironmentProblem when the port cannot open `device`, and
    ValueError for arguments that cannot go together."""
    if tensors not in (None, "numpy", "torch"):
        raise ValueError(f"tensors: got {tensors!r}, expected \"numpy\", \"torch\" or None (torch where it imports)")
    if tensors == "numpy" and device != "cpu":
        raise ValueError(f"tensors=\"numpy\" with device={device!r}: numpy arrays live on the host; "
                         f"use tensors=\"torch\" for {device}, or device=\"cpu\"")
    binary = _harness(ctxscore)
    port = _port_command(function, device, tensors, geometry)
    failure_dir, temporary = _failure_dir(failures)
    env = dict(os.environ, **{FAILURE_DIR_VARIABLE: failure_dir})
    if case_size is None and device == "cpu":
        case_size = "small"
    cmd = [binary, "gate", "--port", port, "--port-timeout", str(timeout), "--json",
           "--max-failures", str(max_failures)]
    cmd += ["--cases", str(cases)] if cases is not None else []
    cmd += ["--compile-keys", str(compile_keys)] if compile_keys is not None else []
    cmd += ["--case-size", case_size] if case_size else []
    cmd += ["--seed", str(seed)] if seed is not None else []
    cmd += ["--min-cases", str(min_cases)] if min_cases is not None else []
    cmd += ["--time-budget", str(time_budget)] if time_budget else []
    cmd += ["--corpus", os.path.abspath(corpus)] if corpus else []
    cmd += ["--fail-fast"] if fail_fast else []
    cmd += ["--junit", os.path.abspath(junit)] if junit else []
    cmd += ["--shard", shard] if shard else []
    cmd += ["--jobs", str(jobs)] if jobs is not None else []
    for name in checks or ():
        cmd += ["--check", name]
    for name in require or ():
        cmd += ["--require", name]
    returncode, stdout, stderr = _run_reporting_progress(cmd, env)
    if temporary and not os.listdir(failure_dir):
        os.rmdir(failure_dir)  # no failure used it
    if returncode == EXIT_STATUS["unavailable"]:
        raise EnvironmentProblem(f"ctxscore gate could not run {function} on {device}: {stderr.strip()[-2000:]}")
    if returncode == EXIT_STATUS["bad_input"]:
        raise ValueError(f"ctxscore gate refused the call (exit {returncode}): {stderr.strip()[-2000:]}")
    try:
        report = json.loads(stdout)
    except ValueError:
        raise RuntimeError(f"ctxscore did not report (exit {returncode}): {stderr.strip()[-2000:]}")
    for suite in report.get("suites", []):
        if suite.get("status") == "not run":
            warnings.warn(f"ctxscore gate: {suite.get('summary', suite['suite'])}", NotRunWarning, stacklevel=2)
    if not report.get("ok") or returncode != 0:
        pytest.fail(f"ctxscore gate failed for {function}:\n{_failures(report, function, device, tensors)}", pytrace=False)
    return report


@pytest.fixture
def ctxscore_gate(tmp_path):
    """`gate`, with failing cases written into this test's tmp_path."""
    return functools.partial(gate, failures=str(tmp_path / FAILURE_DIR_DEFAULT))
