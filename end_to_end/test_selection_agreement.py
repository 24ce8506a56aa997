"""The Python checker's selection judgement held against the C++ one. On
every corpus fixture, its expected scores moved within their tolerance (a
different draw per fixture) are judged by both: both pass, and the number of
(head, row) pairs whose local top-16 is the stored one is the same in both,
under each tie rule."""
import glob
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

from conftest import HERE, SOURCE

sys.path[:0] = [os.path.join(SOURCE, "python"), os.path.join(HERE, "ports")]
from ctxscore import fixture, selection  # noqa: E402
import perturbed_port  # noqa: E402

CORPUS = sorted(glob.glob(os.path.join(SOURCE, "fixtures", "corpus", "*.safetensors")))


def python_judgement(f, got, tie, stored):
    """(rows, rows matching the stored selection, rows without a near-tie to explain a difference)."""
    p = f.selection_params()
    mine = selection.local_selection(got, f.t["seq_lens"], f.QL, f.rank, f.world, f.G, p, tie)
    want = f.t[stored]
    rows = mine.shape[0] * mine.shape[1]
    matched = sum(set(mine[h, r][mine[h, r] >= 0]) == set(want[h, r][want[h, r] >= 0])
                  for h in range(mine.shape[0]) for r in range(mine.shape[1]))
    unexplained, _ = selection.judge(mine, want, f.t["expected"], f.t["tolerance"], f.t["seq_lens"], f.QL, f.rank,
                                     f.world, f.G, p)
    return rows, matched, unexplained


def test_the_corpus_is_all_judged():
    assert len(CORPUS) >= 42, CORPUS


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_both_checkers_judge_moved_scores_alike(path, ctxscore_bin, tmp_path):
    seed = CORPUS.index(path)
    f = fixture.read(path)
    assert f.has_selection, path
    got = perturbed_port.perturbed(f, seed)
    words = ["env", "PYTHONPATH=" + os.pathsep.join(sys.path[:2]), sys.executable, "-m", "ctxscore.port",
             "perturbed_port:scores", "--tensors", "numpy"]
    env = dict(os.environ, PERTURB_FIXTURE=path, PERTURB_SEED=str(seed), CTXSCORE_FAILURE_DIR=str(tmp_path))
    judged = subprocess.run([ctxscore_bin, "fixtures", "check", path, "--port", " ".join(shlex.quote(w) for w in words)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    cpp = {tie: tuple(int(x) for x in re.search(rf"{label}: (\d+)/(\d+) rows matched", judged.stdout).groups())
           for tie, label in ((selection.HIGHER, "local top-16"), (selection.LOWER, "lower block first"))}
    for tie, stored in ((selection.HIGHER, "selection_higher"), (selection.LOWER, "selection_lower")):
        rows, matched, unexplained = python_judgement(f, got, tie, stored)
        assert unexplained == 0, (tie, path)
        assert cpp[tie] == (matched, rows), (tie, cpp[tie], (matched, rows))
