"""The Python package against the C++ harness's own outputs: the reader takes
every corpus fixture, the selection reproduces the stored C++ selection
exactly, the checker passes a correct port and fails a planted bug, and the
pytest gate fails with the shrunk case."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from ctxscore import fixture as fx
from ctxscore import selection
from ctxscore.check import main as check_main
from ctxscore.pytest_plugin import gate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fixtures", "corpus")


def corpus():
    return fx.files_under([CORPUS])


@pytest.mark.parametrize("path", corpus(), ids=os.path.basename)
def test_python_selection_is_the_stored_cpp_selection(path):
    f = fx.read(path)
    assert f.has_selection
    dense = np.where(np.broadcast_to(f.t["written"].astype(bool), f.t["expected"].shape), f.t["expected"], np.nan)
    p = f.selection_params()
    for tie, stored in ((selection.HIGHER, "selection_higher"), (selection.LOWER, "selection_lower")):
        mine = selection.local_selection(dense.astype(np.float32), f.t["seq_lens"], f.QL, f.rank, f.world, f.G, p, tie)
        np.testing.assert_array_equal(mine, f.t[stored])


def test_reader_names_a_malformed_fixture(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(open(corpus()[0], "rb").read()[:100])
    with pytest.raises(fx.FixtureError, match="bad.safetensors"):
        fx.read(str(bad))


def test_checker_tells_a_malformed_fixture_from_a_failing_port(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08" + b"\x00" * 7 + b"{}")
    assert check_main([str(bad), "--impl", "ctxscore.ports.numpy_port:scores", "--tensors", "numpy"]) == 2
    assert "BAD" in capsys.readouterr().out


def test_checker_exits_as_the_command_line_does_on_bad_usage(tmp_path, capsys):
    assert check_main([str(tmp_path / "absent.safetensors"), "--impl", "ctxscore.ports.numpy_port:scores"]) == 2
    assert check_main([str(tmp_path), "--impl", "ctxscore.ports.numpy_port:scores"]) == 2  # no fixtures in it
    assert check_main([CORPUS, "--impl", "no_such_module_here:fn"]) == 2
    with pytest.raises(SystemExit) as usage:
        check_main(["--impl"])
    assert usage.value.code == 2


@pytest.mark.parametrize("tensors", ["numpy", "torch"])
def test_checker_passes_the_numpy_and_torch_ports(tensors):
    pytest.importorskip("torch") if tensors == "torch" else None
    impl = "ctxscore.ports.numpy_port:scores" if tensors == "numpy" else "ctxscore.ports.torch_port:scores"
    assert check_main([CORPUS, "--impl", impl, "--tensors", tensors]) == 0


@pytest.mark.parametrize("planted, kind", [("cutoff_slack_one", "outside tolerance"),
                                           ("ignores_sm_scale", "outside tolerance")])
def test_checker_fails_a_planted_bug_with_its_verdict(planted, kind, capsys):
    """The verdict, not just the exit status (1 is also what a malformed fixture gives): FAIL lines of the
    expected kind, every fixture read."""
    assert check_main([CORPUS, "--impl", "ctxscore.ports.numpy_port:" + planted, "--tensors", "numpy"]) == 1
    out = capsys.readouterr().out
    failing = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert failing and all(kind in detail for detail in out.split("FAIL")[1:]), out
    assert "BAD" not in out and ", 0 malformed fixtures," in out, out


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_gate_passes_a_correct_port_and_fails_a_planted_bug_with_its_shrunk_case():
    gate("ctxscore.ports.numpy_port:scores", tensors="numpy", cases=20, case_size="small", corpus=CORPUS)
    with pytest.raises(pytest.fail.Exception) as failed:
        gate("ctxscore.ports.numpy_port:cutoff_slack_one", tensors="numpy", cases=200, seed=1, case_size="small", corpus=CORPUS)
    text = str(failed.value)
    assert "case: Case{" in text and re.search(r"replay: /\S*ctxscore fixtures check", text), text


def test_gate_refuses_numpy_arrays_on_a_device_before_running_anything():
    with pytest.raises(ValueError, match="numpy arrays live on the host"):
        gate("ctxscore.ports.numpy_port:scores", tensors="numpy", device="cuda", ctxscore="/nonexistent/ctxscore")
    with pytest.raises(ValueError, match="tensors: got 'jax'"):
        gate("ctxscore.ports.numpy_port:scores", tensors="jax", ctxscore="/nonexistent/ctxscore")


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_a_check_that_cannot_run_here_passes_with_a_warning_naming_it():
    from ctxscore.pytest_plugin import NotRunWarning

    with pytest.warns(NotRunWarning, match="capture: not run: port cannot record a graph"):
        gate("ctxscore.ports.numpy_port:scores", tensors="numpy", checks=["capture"])


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_a_clean_cpu_gate_warns_only_of_the_checks_that_did_not_run():
    """The default gate of a correct CPU port raises no warning but one
    NotRunWarning per check that truly did not run here, each naming it."""
    import warnings

    from ctxscore.pytest_plugin import CHECKS, NotRunWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gate("ctxscore.ports.numpy_port:scores", tensors="numpy")
    assert caught and all(w.category is NotRunWarning for w in caught), [str(w.message) for w in caught]
    not_run = [re.match(r"ctxscore gate: (\w+): not run: ", str(w.message)) for w in caught]
    assert all(not_run) and {m.group(1) for m in not_run} <= set(CHECKS), [str(w.message) for w in caught]
    assert len(not_run) == len({m.group(1) for m in not_run}), [str(w.message) for w in caught]  # one each


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_a_required_check_that_cannot_run_here_fails_the_gate():
    with pytest.raises(pytest.fail.Exception, match="failed: capture"):
        gate("ctxscore.ports.numpy_port:scores", tensors="numpy", checks=["capture"], require=["capture"])


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_fail_fast_stops_at_the_first_failing_check_and_the_junit_file_says_so(tmp_path):
    from ctxscore.pytest_plugin import NotRunWarning

    junit = tmp_path / "gate.xml"
    with pytest.raises(pytest.fail.Exception, match="failed: fuzz\n") as failed, \
            pytest.warns(NotRunWarning, match="repeatability: not run: the gate stopped at the first failing check, fuzz"):
        gate("ctxscore.ports.numpy_port:cutoff_slack_one", tensors="numpy", cases=200, seed=1, case_size="small",
             corpus=CORPUS, checks=["fuzz", "repeatability", "corpus"], fail_fast=True, junit=str(junit))
    assert "corpus" not in str(failed.value).splitlines()[0]
    xml = junit.read_text()
    assert xml.count("<failure") == 1 and xml.count("<skipped") == 2, xml


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_a_sharded_gate_needs_a_seed():
    with pytest.raises(ValueError, match="--shard 1/2 needs --seed"):
        gate("ctxscore.ports.numpy_port:scores", tensors="numpy", shard="1/2")


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_the_in_process_replay_finds_a_kernel_of_the_callers_folder_from_any_folder(tmp_path, monkeypatch):
    kernels = tmp_path / "kernel_repo"
    kernels.mkdir()
    (kernels / "my_kernel.py").write_text("from ctxscore.ports.numpy_port import cutoff_slack_one as scores\n")
    monkeypatch.chdir(kernels)
    with pytest.raises(pytest.fail.Exception) as failed:
        gate("my_kernel:scores", tensors="numpy", checks=["fuzz"], seed=1, failures=str(tmp_path / "failures"))
    line = re.search(r"in process: (.+)$", str(failed.value), re.M).group(1)
    again = subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd="/")
    assert again.returncode == 1 and "cannot load" not in again.stdout + again.stderr, (line, again.stdout, again.stderr)


@pytest.mark.skipif(not os.environ.get("CTXSCORE_BIN"), reason="needs the ctxscore binary ($CTXSCORE_BIN)")
def test_the_gate_names_the_checks_the_binary_runs():
    """CHECKS is the binary's registry: its names in order, as `--list` prints them with their claims."""
    from ctxscore.pytest_plugin import CHECKS

    listed = subprocess.run([os.environ["CTXSCORE_BIN"], "gate", "--list"], capture_output=True, text=True, check=True)
    records = json.loads(subprocess.run([os.environ["CTXSCORE_BIN"], "gate", "--list", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    assert tuple(line.split()[0] for line in listed.stdout.splitlines()) == CHECKS, listed.stdout
    assert [line.split(None, 1)[1] for line in listed.stdout.splitlines()] == [r["claim"] for r in records]
    assert {r["name"]: r["needs"] for r in records if r["needs"]} == {
        "capture": ["capture"], "refusals": ["refusals"], "corpus_capture": ["capture"], "geometry": ["geometry"]}


def test_port_runs_as_a_module_and_answers_hello():
    from ctxscore import safetensors
    from ctxscore.port import read_frame, write_frame

    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.Popen([sys.executable, "-m", "ctxscore.port", "ctxscore.ports.numpy_port:scores", "--tensors", "numpy"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    from ctxscore.wire_format import PROTOCOL_VERSION

    write_frame(p.stdin, safetensors.encode({}, {"message": "hello", "protocol": str(PROTOCOL_VERSION)}))
    _, meta = safetensors.decode(read_frame(p.stdout), "reply")
    assert meta["message"] == "hello" and meta["supports"] == "score,time,refuse", meta
    assert meta["protocol"] == str(PROTOCOL_VERSION) and meta["toolchain"].startswith("python "), meta
    write_frame(p.stdin, safetensors.encode({}, {"message": "bye"}))
    assert safetensors.decode(read_frame(p.stdout), "reply")[1]["message"] == "bye"
    assert p.wait(timeout=10) == 0


def _refused(function, storages, **metadata):
    """The worker's reply to one `score` of `function` (a numpy port)."""
    from ctxscore import safetensors
    from ctxscore.port import read_frame, write_frame

    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.Popen([sys.executable, "-m", "ctxscore.port", f"ctxscore.ports.numpy_port:{function}", "--tensors",
                          "numpy"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    meta = {"message": "score", "idx_q_shape": "2,1,128", "idx_q_strides": "128,128,1", "index_cache_shape": "1,128,128",
            "block_table_shape": "2,2", "block_table_strides": "2,1", "out_shape": "1,2,2", "out_strides": "4,2,1",
            "max_seq_len": "256", "rank": "0", "world_size": "1", "max_query_len": "1", "sm_scale": "0.1"}
    meta.update(metadata)
    write_frame(p.stdin, safetensors.encode(storages, meta))
    reply = safetensors.decode(read_frame(p.stdout), "reply")
    p.stdin.close()
    assert p.wait(timeout=10) == 0
    return reply


def _call_storages(q_dtype=np.uint16):
    return {"idx_q": np.full(256, 0x3F80, np.uint16).astype(q_dtype), "index_cache": np.zeros(16384, np.uint16),
            "block_table": np.zeros(4, np.int32), "seq_lens": np.array([5, 200], np.int32),
            "out": np.full(4, -12345.0, np.float32)}


def test_a_refusal_carries_every_storage_as_the_call_left_it():
    storages = _call_storages(np.float16)  # fp16 queries: the query dtype clause
    tensors, meta = _refused("scores", storages)
    assert meta["message"] == "error" and "idx_q: got float16, expected bf16" in meta["reason"], meta
    assert sorted(tensors) == sorted(storages)
    for name, sent in storages.items():
        assert tensors[name].dtype == sent.dtype and tensors[name].tobytes() == sent.tobytes(), name


def test_a_refusal_shows_what_was_written_before_it():
    tensors, meta = _refused("writes_before_refusing", _call_storages(), world_size="0")
    assert meta["message"] == "error" and "world_size: got 0" in meta["reason"], meta
    assert (tensors["out"] == 0).all(), tensors["out"]


def test_a_valid_call_in_the_broken_call_layout_is_scored():
    tensors, meta = _refused("scores", _call_storages(), seq_lens_shape="2", seq_lens_strides="1",
                             index_cache_strides="16384,128,1")
    assert meta["message"] == "scores" and sorted(tensors) == ["out"], meta
