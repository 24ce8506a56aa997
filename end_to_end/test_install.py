"""The paths a kernel author takes, away from this repository: `cmake
--install` into a prefix, and `pip wheel` + `pip install` of the Python
package into a target; the binaries and the package say one version; then,
from an unrelated directory holding only the test file of installed_gate.py,
with nothing on PATH that the install did not put there, that file's tests
pass (the default gate passes correct ports and fails each planted one);
nothing is written anywhere else. And a C++ project of their own finds the installed
CMake package and judges a corpus fixture with its libraries."""
import glob
import os
import platform
import re
import subprocess
import sys

from conftest import SOURCE
from installed_gate import planted_ports, write as write_gate_tests

SYSTEM_PATH = "/usr/bin:/bin"  # env and sh, which the port command line uses



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
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), SOURCE], check=True)
    wheel = glob.glob(str(wheels / "ctxscore-*.whl"))
    assert len(wheel) == 1 and wheel[0].endswith(f"-py3-none-linux_{platform.machine()}.whl"), wheel  # a platform wheel: it bundles the binary
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), wheel[0]], check=True)
    write_gate_tests(str(work))

    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSCORE_") and k not in ("PYTHONPATH", "PATH")}
    env.update(PATH=f"{prefix / 'bin'}:{site / 'bin'}:{SYSTEM_PATH}", HOME=str(home), PYTHONPATH=str(site),
               PYTHONDONTWRITEBYTECODE="1")

    def run(*args):
        return subprocess.run(list(args), capture_output=True, text=True, cwd=work, env=env, timeout=900)

    # The installed CLI and the package's console script each find their own corpus, and say the package's
    # version, which the wheel's name carries too.
    package_version = run(sys.executable, "-c", "import ctxscore; print(ctxscore.__version__)").stdout.strip()
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", package_version), package_version
    assert os.path.basename(wheel[0]).startswith(f"ctxscore-{package_version}-"), (wheel, package_version)
    for cli in ("ctxscore", str(site / "bin" / "ctxscore")):
        version = run(cli, "--version")
        assert version.returncode == 0, version.stderr
        assert version.stdout.splitlines()[0] == f"ctxscore {package_version}", version.stdout
        corpus = version.stdout.splitlines()[1].removeprefix("corpus: ")
        assert os.path.isdir(corpus) and corpus.startswith(str(tmp_path)), version.stdout
        # The kernel author's guide, the native port's header and the campaign recipes come with the install.
        guide = run(cli, "guide")
        assert guide.returncode == 0 and guide.stdout.startswith("# ctxscore"), guide.stderr
        installed = [line.strip() for line in guide.stdout.split("Installed beside this binary:")[1].splitlines() if line.strip()]
        assert len(installed) == 7 and all(os.path.exists(f) and f.startswith(str(tmp_path)) for f in installed), installed
        recipes = sorted(os.listdir(installed[-1]))
        assert recipes == ["github_actions_matrix.yml", "one_host_per_gpu.sh", "pytest_xdist", "slurm_merge.sbatch",
                           "slurm_shard.sbatch"], recipes
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
