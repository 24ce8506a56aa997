"""A campaign past one machine: shard reports merged into one (`ctxscore
merge`), refused where they are not one campaign's whole set, and the Ray
launcher (a local cluster here, as on a laptop) giving the unsharded run's
cases, verdicts and failures, its planted bug's fixture gathered."""
import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import SOURCE

# Drawn checks, and the corpus for one that every shard runs whole.
CHECKS = ["--check", "fuzz", "--check", "repeatability", "--check", "shard_columns", "--check", "corpus"]


def shard_reports(run, port, tmp_path, seed, shards, only=None):
    files = []
    for k in only or range(1, shards + 1):
        done = run("gate", "--port", port, "--seed", str(seed), "--shard", f"{k}/{shards}", "--cases", "40", "--jobs", "1",
                   "--json", *CHECKS)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        path = tmp_path / f"seed{seed}-{k}-of-{shards}.json"
        path.write_text(done.stdout)
        files.append(str(path))
    return files


def outline(report):
    """What must match between the merged and the unsharded run: per check, its verdict, cases and failures,
    and every case judged."""
    return [(s["suite"], s["status"], s["calls"], s["failures"], sorted(map(tuple, s["judged"])),
             sorted(f["name"] for f in s["failing"])) for s in report["suites"]]


def test_merge_refuses_a_missing_a_doubled_and_another_seeds_shard(run, port_command, tmp_path):
    port = port_command("ctxscore.ports.numpy_port:scores")
    one, two, three = shard_reports(run, port, tmp_path, 5, 3)
    other = shard_reports(run, port, tmp_path, 6, 3, only=[3])[0]
    whole = run("merge", one, two, three, "--json")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    for files, says in [([one, two], "shard 3/3 missing (2 of 3 given); expected every shard once"),
                        ([one, two, two, three], f"shard 2/3 given twice: {two} and {two}"),
                        ([one, two, other], "has seed \"6\"")]:
        done = run("merge", *files)
        assert done.returncode == 2 and says in done.stderr and not done.stdout, (files, done.stderr)
    # Another check, another port, or not a report at all, each named.
    bad = tmp_path / "not_a_report.json"
    bad.write_text("[1, 2]")
    done = run("merge", one, str(bad))
    assert done.returncode == 2 and "not_a_report.json: not a JSON object" in done.stderr, done.stderr
    edited = json.loads(open(three).read())
    edited["run"]["backend"] = "--port 'another kernel'"
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    done = run("merge", one, two, str(tmp_path / "edited.json"))
    assert done.returncode == 2 and "has backend" in done.stderr and "the same backend" in done.stderr, done.stderr


def test_merged_shards_are_the_unsharded_run(run, port_command, tmp_path):
    for function, status in (("scores", 0), ("cutoff_slack_one", 1)):
        port = port_command(f"ctxscore.ports.numpy_port:{function}")
        files = shard_reports(run, port, tmp_path, 9, 4)
        merged = run("merge", *files, "--json", "--junit", str(tmp_path / "merged.xml"))
        assert merged.returncode == status, merged.stdout + merged.stderr
        whole = run("gate", "--port", port, "--seed", "9", "--cases", "40", "--jobs", "1", "--json", "--max-failures", "0",
                    *CHECKS)
        if status == 0:
            assert outline(json.loads(merged.stdout)) == outline(json.loads(whole.stdout))
        else:  # each shard stops at its first failure; every failing check fails merged too
            assert [s["status"] for s in json.loads(merged.stdout)["suites"]] == \
                   [s["status"] for s in json.loads(whole.stdout)["suites"]]
        assert (tmp_path / "merged.xml").read_text().count("<testcase") == len(CHECKS) // 2


def launch(tmp_path, ctxscore_bin, function, *args, port=None, env=None):
    path = os.pathsep.join([os.path.join(SOURCE, "python"), os.path.join(SOURCE, "end_to_end", "ports")])
    port = port or f"{sys.executable} -m ctxscore.port ctxscore.ports.numpy_port:{function} --tensors numpy"
    full = dict(os.environ, CTXSCORE_BIN=ctxscore_bin, PYTHONPATH=path, **(env or {}))
    return subprocess.run([sys.executable, "-m", "ctxscore.ray_campaign", "--out", str(tmp_path / "campaign"), *args, "--",
                           "--port", port, "--cases", "40", "--jobs", "1", *CHECKS],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=600)


def test_a_ray_campaign_of_four_shards_is_the_unsharded_run_and_gathers_its_fixtures(run, port_command, ctxscore_bin,
                                                                                      tmp_path):
    done = launch(tmp_path, ctxscore_bin, "scores", "--shards", "4", "--seed", "13")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 of 4 shards done, 0 failing, 0 died" in done.stderr, done.stderr
    merged = json.loads((tmp_path / "campaign" / "merged.json").read_text())
    whole = run("gate", "--port", port_command("ctxscore.ports.numpy_port:scores"), "--seed", "13", "--cases", "40",
                "--jobs", "1", "--json", *CHECKS)
    assert outline(merged) == outline(json.loads(whole.stdout))
    # A planted bug: its shards' fixtures arrive in one folder, and the merged report points there.
    planted = tmp_path / "planted"
    planted.mkdir()
    done = launch(planted, ctxscore_bin, "cutoff_slack_one", "--shards", "4", "--seed", "13")
    assert done.returncode == 1, done.stdout + done.stderr
    gathered = planted / "campaign" / "failures"
    fuzz = next(s for s in json.loads((planted / "campaign" / "merged.json").read_text())["suites"] if s["suite"] == "fuzz")
    assert fuzz["status"] == "FAILED" and len(fuzz["failing"]) == 4, fuzz
    for row in fuzz["failing"]:
        assert os.path.dirname(row["fixture"]) == str(gathered) and os.path.isfile(row["fixture"]), row
        assert shlex.split(row["replay"])[3] == row["fixture"] and row["where"].startswith(row["fixture"] + " ("), row
    again = run("fixtures", "check", fuzz["failing"][0]["fixture"], "--port",
                port_command("ctxscore.ports.numpy_port:cutoff_slack_one"))
    assert again.returncode == 1, again.stdout + again.stderr


def test_a_shard_that_dies_is_run_again_once_then_reported(ctxscore_bin, tmp_path):
    # The port fails at start the first time any shard runs it, and works after: the retry passes.
    marker = tmp_path / "started_once"
    worker = f"{sys.executable} -m ctxscore.port ctxscore.ports.numpy_port:scores --tensors numpy"
    flaky = f"sh -c 'if [ -e {marker} ]; then exec {worker}; else touch {marker}; exit 3; fi'"
    done = launch(tmp_path, ctxscore_bin, None, "--shards", "1", "--seed", "3", port=flaky)
    assert done.returncode == 0 and marker.exists(), done.stdout + done.stderr
    dead = tmp_path / "dead"
    dead.mkdir()
    done = launch(dead, ctxscore_bin, None, "--shards", "2", "--seed", "3", port="sh -c 'exit 3'")
    assert done.returncode == 2, done.stdout + done.stderr
    for k in (1, 2):
        assert f"shard {k}/2 died after 1 retry" in done.stderr, done.stderr
        assert f"--shard {k}/2 --seed 3" in done.stderr, done.stderr
    assert not (dead / "campaign" / "merged.json").exists()


@pytest.mark.parametrize("args, says", [(["--shards", "0", "--seed", "1"], "--shards 0: expected 1 or more"),
                                        (["--shards", "2", "--seed", "1", "--", "--seed", "4"],
                                         "--seed after `--`: the launcher sets it")])
def test_the_launcher_refuses_bad_usage(tmp_path, args, says):
    full = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"))
    done = subprocess.run([sys.executable, "-m", "ctxscore.ray_campaign", "--out", str(tmp_path), *args],
                          capture_output=True, text=True, env=full)
    assert done.returncode == 2 and says in done.stderr, done.stderr
