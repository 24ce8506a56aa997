"""Gate a kernel from its own test suite: one test runs the ctxscore harness
against the kernel through the port protocol (random cases with shrinking,
half with out=None, drawn from a few compile keys so a JIT kernel compiles
a few times; the launch geometry when given; then the corpus) and fails
with the shrunk case, its fixture's absolute path and its replay line.

    from ctxscore.pytest_plugin import gate

    def test_indexer_context_scores():
        gate("my_kernels.indexer:indexer_context_scores", device="cuda")

The harness binary is the one bundled with this package; `ctxscore=` or
$CTXSCORE_BIN overrides it, and `ctxscore` on PATH is the last resort.
Failing cases are written to `failures=`, else $CTXSCORE_FAILURE_DIR, else
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
import time

import pytest

from .cli import binary as bundled_binary

_current_request = None


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
        raise RuntimeError("no ctxscore binary: this install has none bundled (it was built without CMake or a "
                           "compiler); set CTXSCORE_BIN or pass ctxscore=")
    return found


def _failure_dir(failures):
    if failures:
        return os.path.abspath(failures)
    if os.environ.get("CTXSCORE_FAILURE_DIR"):
        return os.path.abspath(os.environ["CTXSCORE_FAILURE_DIR"])
    if _current_request is not None:
        return str(_current_request.getfixturevalue("tmp_path") / "ctxscore-failures")
    return tempfile.mkdtemp(prefix="ctxscore-failures-")


def _port_command(function, device, tensors, geometry):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([here, os.getcwd()] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    cmd = ["env", "PYTHONPATH=" + path, sys.executable, "-m", "ctxscore.port", function, "--device", device]
    if tensors:
        cmd += ["--tensors", tensors]
    if geometry:
        cmd += ["--geometry", geometry]
    return " ".join(shlex.quote(c) for c in cmd)


def _failures(report):
    lines = []
    for suite in report.get("suites", []):
        if suite.get("stopped"):
            lines.append(f"{suite['backend']} {suite['suite']}: stopped early: {suite['stopped']}")
        for row in suite.get("failing", [])[:3]:
            lines.append(f"{suite['backend']} {suite['suite']}: {row['name']}: {row['message']}")
            if row.get("case"):
                lines.append(f"  case: {row['case']}")
            if row.get("where"):
                lines.append(f"  fixture: {row['where']}")
    return "\n".join(lines)


def gate(function, *, cases=200, device="cpu", tensors=None, geometry=None, case_size=None, corpus=None, seed=1,
         timeout=60, compile_keys=8, time_budget=None, failures=None, ctxscore=None):
    """Runs the harness against `function` ("module:function", upstream's
    signature); fails the calling test with the shrunk case on any failure.

    compile_keys: the fuzz cases come from at most this many (H, QL, world,
    rank, CHUNK, N, sm_scale) sets, so a kernel that specializes on them
    compiles a few times (0: unlimited). time_budget: seconds for the whole
    gate; no new case starts once they are spent, and the cases judged by
    then decide. failures: where failing cases are written."""
    binary = _harness(ctxscore)
    port = _port_command(function, device, tensors, geometry)
    env = dict(os.environ, CTXSCORE_FAILURE_DIR=_failure_dir(failures))
    common = ["--port", port, "--port-timeout", str(timeout), "--json"]
    runs = [[binary, "fuzz", "--cases", str(cases), "--seed", str(seed), "--compile-keys", str(compile_keys)]
            + (["--case-size", case_size] if case_size else []) + common,
            [binary, "fixtures", "check"] + ([os.path.abspath(corpus)] if corpus else []) + ["--out-mode", "all"] + common]
    deadline = time.monotonic() + time_budget if time_budget else None
    for cmd in runs:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            cmd = cmd + ["--time-budget", f"{left:.3f}"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            raise RuntimeError(f"ctxscore did not report (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
        if not report.get("ok"):
            pytest.fail(f"ctxscore gate failed for {function}:\n{_failures(report)}", pytrace=False)


@pytest.fixture
def ctxscore_gate(tmp_path):
    """`gate`, with failing cases written into this test's tmp_path."""
    return functools.partial(gate, failures=str(tmp_path / "ctxscore-failures"))
