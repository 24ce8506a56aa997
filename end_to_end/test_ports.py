"""The port protocol end to end, as a kernel author uses it: the numpy and
torch ports (CPU) and the native worker serving the reference library pass
`ctxscore fuzz --port` and `fixtures check --port` in every out mode; a
planted bug comes back as a shrunk score mismatch, never as an error; the
capture properties run on the CPU through a port that records graphs there:
a graph that replays stale inputs fails them with a replay line that fails
again (`fixtures check --capture`), and a port that raises while it records
or replays fails them with the case it raised on, written as a fixture."""
import os
import re
import shlex
import subprocess
import sys
import threading

from conftest import HERE, SOURCE


def script_port(*args):
    """The command line of a Python port: the interpreter with the package on its path, then `args`."""
    words = ["env", "PYTHONPATH=" + os.path.join(SOURCE, "python"), sys.executable, *args]
    return " ".join(shlex.quote(w) for w in words)


def python_port(function, *extra):
    return script_port("-m", "ctxscore.port", function, *extra)


def native_port():
    worker, library = os.environ.get("CTXSCORE_NATIVE_PORT"), os.environ.get("CTXSCORE_REFERENCE_PORT_LIB")
    assert worker and library, "CTXSCORE_NATIVE_PORT and CTXSCORE_REFERENCE_PORT_LIB come from CTest"
    return f"{shlex.quote(worker)} {shlex.quote(library)}"


def passes_fuzz_and_corpus(run, port, cases):
    fuzzed = run("fuzz", "--port", port, "--cases", str(cases), "--case-size", "small")
    assert fuzzed.returncode == 0, fuzzed.stdout + fuzzed.stderr
    assert re.search(rf"^port +fuzz +{cases} +0 +0 ", fuzzed.stdout, re.M), fuzzed.stdout
    checked = run("fixtures", "check", "--port", port, "--out-mode", "all")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"^port +corpus +[1-9][0-9]* +0 +0 ", checked.stdout, re.M), checked.stdout


def test_the_numpy_port_passes(run):
    passes_fuzz_and_corpus(run, python_port("ctxscore.ports.numpy_port:scores", "--tensors", "numpy"), 60)


def test_the_native_worker_serves_the_reference_library(run):
    passes_fuzz_and_corpus(run, native_port(), 100)


def test_the_torch_port_passes_with_its_geometry(run):
    port = python_port("ctxscore.ports.torch_port:scores", "--geometry", "ctxscore.ports.torch_port:geometry")
    fuzzed = run("fuzz", "--port", port, "--cases", "60", "--case-size", "small")
    assert fuzzed.returncode == 0, fuzzed.stdout + fuzzed.stderr
    assert re.search(r"^port +geometry +[1-9][0-9]* +0 +0 ", fuzzed.stdout, re.M), fuzzed.stdout


def test_a_planted_bug_comes_back_as_a_shrunk_mismatch(run):
    planted = python_port("ctxscore.ports.numpy_port:cutoff_slack_one", "--tensors", "numpy")
    fuzzed = run("fuzz", "--port", planted, "--cases", "200", "--seed", "1", "--case-size", "small")
    text = fuzzed.stdout + fuzzed.stderr
    assert fuzzed.returncode == 1, text
    assert "shrunk: Case{" in text
    assert re.search(r"replay: /\S*ctxscore fixtures check", text), text
    assert re.search(r"FAIL \[port vs reference, out [a-z_]+\] MISMATCH", text), text
    assert re.search(r"^port +fuzz +\d+ +1 +0 ", fuzzed.stdout, re.M), fuzzed.stdout  # stopped at the first failure, no errors


def capture_properties(port, failures):
    """The capture properties run against `port`: (return code, output)."""
    properties = os.path.join(os.environ["CTXSCORE_BUILD_DIR"], "property_tests", "ctxscore_gpu_properties")
    env = dict(os.environ, CTXSCORE_PROPERTY_BACKEND="port", CTXSCORE_PORT=port, CTXSCORE_FAILURE_DIR=str(failures))
    done = subprocess.run([properties, "--gtest_filter=Capture.*"], capture_output=True, text=True, env=env, timeout=600)
    return done.returncode, done.stdout + done.stderr


def test_a_port_that_raises_at_capture_or_replay_fails_the_capture_property_with_its_case(tmp_path):
    broken = os.path.join(SOURCE, "property_tests", "ports", "broken_port.py")
    for behaviour, said, case in (("capture_raises", "capture raised: ", "case: Case{capture_probe "),
                                  ("replay_raises", "replay raised: ", "shrunk case: Case{capture_replay ")):
        failures = tmp_path / behaviour
        rc, text = capture_properties(script_port(broken, behaviour), failures)
        assert rc == 1, text
        assert said in text and "RuntimeError: " in text and case in text, text
        assert "SKIPPED" not in text, text
        written = list(failures.glob("capture_*.safetensors"))
        assert len(written) == 1 and f"fixture: {written[0]}" in text, (written, text)


def test_a_graph_replaying_its_recorded_inputs_fails_the_capture_properties_and_its_replay_line(ctxscore_bin, tmp_path):
    graph = os.path.join(HERE, "ports", "graph_port.py")
    rc, text = capture_properties(script_port(graph, "right"), tmp_path / "right")
    assert rc == 0 and "[  PASSED  ] 2 tests." in text and "SKIPPED" not in text, text

    rc, text = capture_properties(script_port(graph, "stale"), tmp_path / "stale")
    assert rc == 1 and "[  FAILED  ] Capture.DummyBatchAtTheStableBoundReplaysEveryBatch" in text, text
    lines = [m.group(1) for m in re.finditer(r"\(replay: (ctxscore fixtures check \S+capture_seed\S+ .*)\)$", text, re.M)]
    assert len(lines) == 1 and lines[0].endswith(" --capture"), text
    env = dict(os.environ, PATH=os.path.dirname(ctxscore_bin) + os.pathsep + os.environ["PATH"])

    def replay(line):
        return subprocess.run(["sh", "-c", line], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)

    through_a_graph = replay(lines[0])
    assert through_a_graph.returncode == 1 and "MISMATCH" in through_a_graph.stdout, through_a_graph.stdout
    plain = replay(lines[0][: -len(" --capture")])  # an eager call does not have the bug
    assert plain.returncode == 0, plain.stdout + plain.stderr


def test_a_request_larger_than_the_memory_here_is_refused_before_it_is_allocated():
    """Both workers read an announced length first: one past what this
    machine can give (2^38 - 1 bytes, past any machine these run on) ends
    the worker at once with one line naming both sizes, not with an
    allocation that takes the machine's memory or a crash."""
    announced = (1 << 38) - 1
    head = announced.to_bytes(8, "little")
    for command in (python_port("ctxscore.ports.numpy_port:scores", "--tensors", "numpy"), native_port()):
        # This worker's own peak, from its wait status: the maximum over the
        # test process's children would include every earlier port.
        child = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        watchdog = threading.Timer(60, child.kill)
        watchdog.start()
        child.stdin.write(head)
        child.stdin.close()
        err = child.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(child.pid, 0)
        watchdog.cancel()
        returncode = os.waitstatus_to_exitcode(status)
        peak_mb = usage.ru_maxrss / 1024
        assert returncode > 0, (command, returncode, err)  # an exit status, no signal
        assert f"{announced} bytes announced" in err and "bytes of memory this machine has available" in err, err
        assert len(err.strip().splitlines()) == 1, err
        if not os.environ.get("CTXSCORE_SANITIZED"):
            assert peak_mb < 256, peak_mb


def _request_head(tensors, announced=None):
    """A frame's length field announcing `announced` bytes (by default, as
    many as the document declares), then the document's length and a header
    declaring `tensors` (name, dtype, shape): no body."""
    import json
    import math
    header, end = {}, 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * {"U8": 1, "F32": 4}[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [end, end + size]}
        end += size
    header["__metadata__"] = {"message": "score"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    n = 8 + len(text) + end if announced is None else announced
    return n.to_bytes(8, "little") + len(text).to_bytes(8, "little") + text


def test_a_request_is_refused_from_its_header_before_its_body_is_allocated():
    """Both workers read a request's own header before its body: a 1 GiB
    frame whose header declares nothing, declares a tensor no call holds, or
    a storage that is not 1-D, ends the worker with one line naming what is
    wrong, at a peak far below the frame (the body is never sent)."""
    frames = {"data: bytes [0, ": _request_head([], 1 << 30),
              "junk: unexpected tensor": _request_head([("junk", "U8", [(1 << 30) - 4096])]),
              "out: rank 2, expected a 1-D storage": _request_head([("out", "F32", [1 << 18, 1 << 10])])}
    for command in (python_port("ctxscore.ports.numpy_port:scores", "--tensors", "numpy"), native_port()):
        for words, frame in frames.items():
            child = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            watchdog = threading.Timer(60, child.kill)
            watchdog.start()
            child.stdin.write(frame)
            child.stdin.close()
            err = child.stderr.read().decode(errors="replace")
            _, status, usage = os.wait4(child.pid, 0)
            watchdog.cancel()
            assert os.waitstatus_to_exitcode(status) > 0, (command, words, err)
            assert words in err and len(err.strip().splitlines()) == 1, (command, words, err)
            if not os.environ.get("CTXSCORE_SANITIZED"):
                assert usage.ru_maxrss / 1024 < 100, (command, words, usage.ru_maxrss / 1024)
