"""What every end-to-end test gets: the built binaries (from CTest's
environment), the source tree, and ports started as a user would start them."""
import os
import shlex
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"${name} is not set: run the end-to-end tests through CTest", pytrace=False)
    return value


@pytest.fixture
def ctxscore_bin():
    return _env("CTXSCORE_BIN")


@pytest.fixture
def build_dir():
    return _env("CTXSCORE_BUILD_DIR")


@pytest.fixture
def port_command():
    """port_command("module:function") -> the command line of that Python port (numpy tensors)."""
    path = os.pathsep.join([os.path.join(SOURCE, "python"), os.path.join(HERE, "ports")])

    def command(function, *extra):
        words = ["env", "PYTHONPATH=" + path, sys.executable, "-m", "ctxscore.port", function, "--tensors", "numpy", *extra]
        return " ".join(shlex.quote(w) for w in words)

    return command


@pytest.fixture
def run(ctxscore_bin, tmp_path):
    """run(*args) -> CompletedProcess of `ctxscore args`, in tmp_path, failures into tmp_path/failures."""

    def go(*args, env=None, timeout=600):
        full = dict(os.environ, CTXSCORE_FAILURE_DIR=str(tmp_path / "failures"))
        full.update(env or {})
        return subprocess.run([ctxscore_bin, *args], capture_output=True, text=True, cwd=tmp_path, env=full,
                              timeout=timeout)

    return go
