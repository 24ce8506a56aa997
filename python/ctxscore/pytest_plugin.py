"""Gate a kernel from its own test suite: one test runs the ctxscore harness
against the kernel through the port protocol (random cases with shrinking,
half with out=None, the launch geometry when given, and the corpus) and
fails with the shrunk case, its fixture and its replay line.

    from ctxscore.pytest_plugin import gate

    def test_indexer_context_scores():
        gate("my_kernels.indexer:indexer_context_scores", device="cuda")

The harness binary is `ctxscore` on PATH, or $CTXSCORE_BIN. Installed as a
pytest plugin, the same function is the fixture `ctxscore_gate`.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest


def _harness(binary):
    found = binary or os.environ.get("CTXSCORE_BIN") or shutil.which("ctxscore")
    if not found:
        raise RuntimeError("no ctxscore binary: put it on PATH or set CTXSCORE_BIN")
    return found


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
        for row in suite.get("failing", [])[:3]:
            lines.append(f"{suite['backend']} {suite['suite']}: {row['name']}: {row['message']}")
            if row.get("case"):
                lines.append(f"  case: {row['case']}")
            if row.get("where"):
                lines.append(f"  fixture: {row['where']}")
    return "\n".join(lines)


def gate(function, *, cases=200, device="cpu", tensors=None, geometry=None, case_size=None, corpus=None, seed=1,
         timeout=60, ctxscore=None):
    """Runs the harness against `function` ("module:function", upstream's
    signature); fails the calling test with the shrunk case on any failure."""
    binary = _harness(ctxscore)
    port = _port_command(function, device, tensors, geometry)
    common = ["--port", port, "--port-timeout", str(timeout), "--json"]
    runs = [[binary, "fuzz", "--cases", str(cases), "--seed", str(seed)] + (["--case-size", case_size] if case_size else []) + common,
            [binary, "fixtures", "check"] + ([corpus] if corpus else []) + ["--out-mode", "all"] + common]
    for cmd in runs:
        done = subprocess.run(cmd, capture_output=True, text=True)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            raise RuntimeError(f"ctxscore did not report (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
        if not report.get("ok"):
            pytest.fail(f"ctxscore gate failed for {function}:\n{_failures(report)}", pytrace=False)


@pytest.fixture
def ctxscore_gate():
    return gate
