"""The campaign recipes of recipes/ (README, "Campaigns past one machine"),
each run as its scheduler would run it, simulated by local processes: the
CI matrix's jobs, the Slurm array's tasks, one host's GPUs, pytest-xdist's
workers. Each must end in the merged verdict of one campaign."""
import json
import os
import shutil
import subprocess
import sys

import yaml

from conftest import SOURCE

RECIPES = os.path.join(SOURCE, "recipes")


def environment(ctxscore_bin, tmp_path, **extra):
    """ctxscore on PATH as an install puts it there, and the package importable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "ctxscore").exists():
        os.symlink(ctxscore_bin, bin_dir / "ctxscore")
    path = os.pathsep.join([os.path.join(SOURCE, "python"), os.path.join(SOURCE, "end_to_end", "ports")])
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=path, CTXSCORE_BIN=ctxscore_bin,
                **extra)


def port(function):
    return f"{sys.executable} -m ctxscore.port ctxscore.ports.numpy_port:{function} --tensors numpy"


def bash(script, env, cwd):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def test_the_ci_matrix_recipe_runs_one_shard_per_job_and_merges(ctxscore_bin, tmp_path):
    with open(os.path.join(RECIPES, "github_actions_matrix.yml")) as f:
        workflow = yaml.safe_load(f)
    shards = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    assert int(workflow["env"]["SHARDS"]) == len(shards)
    step = {s.get("name"): s for s in workflow["jobs"]["shard"]["steps"]}["gate one shard"]["run"]
    merge = {s.get("name"): s for s in workflow["jobs"]["merge"]["steps"]}["merge the shards"]["run"]
    merge = "\n".join(line for line in merge.splitlines() if not line.startswith("pip install"))  # installed here
    for function, verdict in (("scores", 0), ("cutoff_slack_one", 1)):
        env = environment(ctxscore_bin, tmp_path, PORT=port(function), SEED=workflow["env"]["SEED"],
                          SHARDS=workflow["env"]["SHARDS"])
        collected = tmp_path / function / "merge_job"
        (collected / "shards").mkdir(parents=True)
        for k in shards:  # each job on a runner of its own, its out/ uploaded, all downloaded into one folder
            runner = tmp_path / function / f"runner{k}"
            runner.mkdir()
            done = bash(step.replace("${{ matrix.shard }}", str(k)), env, runner)
            assert done.returncode == 0, done.stdout + done.stderr
            shutil.copytree(runner / "out", collected / "shards", dirs_exist_ok=True)
        done = bash(merge, env, collected)
        assert done.returncode == verdict, done.stdout + done.stderr
        assert (collected / "merged.xml").is_file()


def test_the_slurm_recipe_runs_one_shard_per_array_task_and_merges(ctxscore_bin, tmp_path):
    out = tmp_path / "campaign"
    env = environment(ctxscore_bin, tmp_path, PORT=port("scores"), SEED="7", CAMPAIGN_DIR=str(out), SLURM_ARRAY_TASK_COUNT="3")
    for k in (1, 2, 3):
        done = subprocess.run(["bash", os.path.join(RECIPES, "slurm_shard.sbatch")], capture_output=True, text=True,
                              env=dict(env, SLURM_ARRAY_TASK_ID=str(k)), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(["bash", os.path.join(RECIPES, "slurm_merge.sbatch")], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads((out / "merged.json").read_text())
    assert merged["ok"] and merged["run"]["merged_shards"] == 3 and (out / "merged.xml").is_file()
    # A task that gave no verdict fails its own job, and the merge names the shard it lacks.
    (out / "shards" / "2.json").unlink()
    done = subprocess.run(["bash", os.path.join(RECIPES, "slurm_merge.sbatch")], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert done.returncode == 2 and "shard 2/3 missing" in done.stderr, done.stderr


def test_the_one_host_recipe_gives_each_shard_its_own_gpu(ctxscore_bin, tmp_path):
    seen = tmp_path / "devices.txt"
    recording = f"sh -c 'echo \"$CUDA_VISIBLE_DEVICES $HIP_VISIBLE_DEVICES\" >> {seen}; exec {port('scores')}'"
    out = tmp_path / "campaign"
    env = environment(ctxscore_bin, tmp_path, PORT=recording, SEED="3", GPUS="2", CAMPAIGN_DIR=str(out))
    done = subprocess.run(["bash", os.path.join(RECIPES, "one_host_per_gpu.sh")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(seen.read_text().splitlines()) == {"0 0", "1 1"}, seen.read_text()
    assert "result: every backend that ran passed" in done.stdout, done.stdout


def test_the_pytest_xdist_recipe_runs_each_check_as_an_item_over_workers(ctxscore_bin, tmp_path):
    for function, verdict in (("scores", 0), ("cutoff_slack_one", 1)):
        env = environment(ctxscore_bin, tmp_path, KERNEL=f"ctxscore.ports.numpy_port:{function}", DEVICE="cpu",
                          TENSORS="numpy", SEED="5", CTXSCORE_FAILURE_DIR=str(tmp_path / "failures"))
        done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-v",
                               os.path.join(RECIPES, "pytest_xdist", "test_gate_each_check.py")],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert done.returncode == verdict, done.stdout + done.stderr
        assert "[gw0]" in done.stdout and "[gw1]" in done.stdout, done.stdout  # both workers took items
        if verdict == 0:
            assert "11 passed" in done.stdout, done.stdout
        else:
            assert "FAILED" in done.stdout and "test_gate[fuzz]" in done.stdout, done.stdout
