"""One validity rule, two readers: every malformed variant of corpus
fixtures (fixture_mutations.py) gets the same verdict, accepted or BAD,
from the C++ reader (`ctxscore fixtures check`) and the Python one
(`ctxscore.fixture.read`), with no signal, traceback, hang or more than
256 MB; a FIFO and a directory named like a fixture are refused by both."""
import json
import math
import os
import resource
import subprocess
import sys

import numpy as np

from conftest import SOURCE
from fixture_mutations import split, variants

sys.path.insert(0, os.path.join(SOURCE, "python"))
from ctxscore import fixture as fx  # noqa: E402

CORPUS = os.path.join(SOURCE, "fixtures", "corpus")
SOURCES = ("length_0.safetensors", "strided_layouts.safetensors")


def test_both_readers_classify_every_variant_alike(ctxscore_bin, tmp_path):
    names = []
    for source in SOURCES:
        raw = open(os.path.join(CORPUS, source), "rb").read()
        for k, (what, data) in enumerate(variants(raw)):
            name = f"{source.split('.')[0]}_{k:03d}.safetensors"
            (tmp_path / name).write_bytes(data)
            names.append((name, what))
    assert len(names) >= 300, len(names)
    os.mkfifo(tmp_path / "a_fifo.safetensors")
    (tmp_path / "a_directory.safetensors").mkdir()
    names += [("a_fifo.safetensors", "a FIFO"), ("a_directory.safetensors", "a directory")]

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([ctxscore_bin, "fixtures", "check", str(tmp_path), "--backend", "reference", "--json"],
                          capture_output=True, text=True, timeout=600)
    peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    assert done.returncode in (1, 2), (done.returncode, done.stderr[-2000:])  # never a signal
    suite = json.loads(done.stdout)["suites"][0]
    cpp_bad = {row["name"].split(" ")[0] for row in suite["failing"] if row["kind"] == "input"}
    cpp_failed = {row["name"].split(" ")[0] for row in suite["failing"]} - cpp_bad
    assert not cpp_failed, f"read, then failed the reference: {sorted(cpp_failed)[:5]}"
    if not os.environ.get("CTXSCORE_SANITIZED"):
        assert peak_mb < 256, peak_mb

    disagree = []
    for name, what in names:
        try:
            fx.read(str(tmp_path / name))
            py_bad = False
        except fx.FixtureError:
            py_bad = True
        if py_bad != (name in cpp_bad):
            disagree.append(f"{name} ({what}): C++ {'BAD' if name in cpp_bad else 'accepts'}, "
                            f"Python {'BAD' if py_bad else 'accepts'}")
    assert not disagree, f"{len(disagree)} of {len(names)} variants:\n" + "\n".join(disagree[:40])
    python_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert python_peak_mb < 256, python_peak_mb
    accepted = len(names) - len(cpp_bad)
    print(f"{len(names)} variants, {len(cpp_bad)} BAD in both, {accepted} accepted by both")
    assert 0 < accepted < len(names) // 4, accepted  # some variants are valid on purpose; most are not


def test_a_fixture_whose_expectations_are_wrong_is_refused_by_both_readers(ctxscore_bin, tmp_path):
    """A well-formed fixture whose `expected` scores are off (as a port that
    scales by the wrong sm_scale would write them) judges nobody: both
    readers refuse it, naming `expected` and the first element off."""
    from ctxscore import safetensors

    tensors, meta = safetensors.decode(open(os.path.join(CORPUS, "strided_layouts.safetensors"), "rb").read(), "source")
    expected = tensors["expected"].copy()
    written = (tensors["written"] != 0)[None, :, :] & np.isfinite(expected)
    assert written.any()
    expected[written] *= np.float32(1.25)
    tensors["expected"] = expected
    path = tmp_path / "scaled_expectations.safetensors"
    path.write_bytes(safetensors.encode(tensors, meta))

    done = subprocess.run([ctxscore_bin, "fixtures", "check", str(path), "--backend", "reference"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "expected: " in done.stdout and "but the inputs give" in done.stdout, done.stdout
    try:
        fx.read(str(path))
        raise AssertionError("the Python reader accepted a fixture whose expectations are wrong")
    except fx.FixtureError as e:
        assert e.field == "expected" and "but the inputs give" in str(e), str(e)


def _sparse_fixture(path, cache_pages=None, data_bytes=None, extra=()):
    """strided_layouts with its cache grown to `cache_pages` pages, its data
    padded by an extra U8 tensor to `data_bytes`, or `extra` tensors (name,
    dtype, shape) appended, in a sparse file: the size is declared, the disk
    holds almost nothing."""
    raw = open(os.path.join(CORPUS, "strided_layouts.safetensors"), "rb").read()
    header, data = split(raw)
    end = len(data)
    if cache_pages is not None:
        entry = header["index_cache"]
        grown = cache_pages * 128 * 128 * 2 - (entry["data_offsets"][1] - entry["data_offsets"][0])
        entry["shape"] = [cache_pages, 128, 128]
        entry["data_offsets"][1] += grown
        for name, other in header.items():
            if name not in ("__metadata__", "index_cache") and other["data_offsets"][0] >= entry["data_offsets"][1] - grown:
                other["data_offsets"] = [o + grown for o in other["data_offsets"]]
        end += grown
    if data_bytes is not None:
        header["padding"] = {"dtype": "U8", "shape": [data_bytes - end], "data_offsets": [end, data_bytes]}
        end = data_bytes
    for name, dtype, shape in extra:
        size = math.prod(shape) * {"U8": 1, "F32": 4, "BF16": 2}[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [end, end + size]}
        end += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + end)


def test_a_file_larger_than_any_fixture_is_refused_from_its_header(ctxscore_bin, tmp_path):
    """A consistent file that declares a 3 GiB cache, or 64 GiB of data, is
    refused by both readers from its header and size, naming the field and
    the limit, within seconds and without reading its body."""
    cases = {"cache_of_3_GiB.safetensors": (dict(cache_pages=98304), "index_cache.shape", "any fixture tensor may hold"),
             "data_of_64_GiB.safetensors": (dict(data_bytes=64 << 30), "file size", "any fixture holds")}
    for name, (how, field, words) in cases.items():
        _sparse_fixture(tmp_path / name, **how)
        assert os.stat(tmp_path / name).st_blocks * 512 < 1 << 20  # sparse: the test needs no disk
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        done = subprocess.run([ctxscore_bin, "fixtures", "check", str(tmp_path / name), "--backend", "reference"],
                              capture_output=True, text=True, timeout=30)
        peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
        assert done.returncode == 2 and f"{field}: " in done.stdout and words in done.stdout, done.stdout + done.stderr
        if not os.environ.get("CTXSCORE_SANITIZED"):
            assert peak_mb < 256, peak_mb
        try:
            fx.read(str(tmp_path / name))
            raise AssertionError(f"the Python reader accepted {name}")
        except fx.FixtureError as e:
            assert e.field == field and words in str(e), str(e)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 < 256


PEAK_OF_CHILD = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)")
PEAK_OF_PYTHON_READER = ("import resource, sys; from ctxscore import fixture as fx\n"
                         "try:\n    fx.read(sys.argv[1]); print('accepted')\n"
                         "except fx.FixtureError as e:\n    print(e.field, '|', e)\n"
                         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)")


def test_a_4_GiB_file_of_the_wrong_tensors_is_refused_from_its_header(ctxscore_bin, tmp_path):
    """A consistent file of almost 4 GiB whose extra tensors each fit the size
    limits, but that a fixture does not hold, is refused by both readers from its header, naming
    that tensor, at a peak under 100 MB: nothing of its body is read."""
    cases = {"eight_unexpected_bytes.safetensors": dict(extra=[(f"junk_{k}", "U8", [(1 << 29) - (1 << 20)]) for k in range(8)]),
             "two_unexpected_floats.safetensors": dict(extra=[(f"scores_{k}", "F32", [(1 << 29) - (1 << 20)]) for k in range(2)])}
    fields = {"eight_unexpected_bytes.safetensors": ("junk_0", "unexpected tensor"),
              "two_unexpected_floats.safetensors": ("scores_0", "unexpected tensor")}
    for name, how in cases.items():
        path = tmp_path / name
        _sparse_fixture(path, **how)
        assert os.stat(path).st_size > (4 << 30) - (16 << 20) and os.stat(path).st_blocks * 512 < 1 << 20
        field, words = fields[name]
        done = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, ctxscore_bin, "fixtures", "check", str(path), "--backend", "reference"],
                              capture_output=True, text=True, timeout=60)
        cpp_peak_mb = int(done.stdout.split()[-1])
        check = subprocess.run([ctxscore_bin, "fixtures", "check", str(path), "--backend", "reference"], capture_output=True, text=True, timeout=60)
        assert check.returncode == 2 and f"{field}: {words}" in check.stdout, check.stdout + check.stderr
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"))
        py = subprocess.run([sys.executable, "-c", PEAK_OF_PYTHON_READER, str(path)], capture_output=True, text=True, timeout=60, env=env)
        lines = py.stdout.splitlines()
        assert lines and lines[0].startswith(f"{field} | ") and words in lines[0], py.stdout + py.stderr
        python_peak_mb = int(lines[-1])
        if not os.environ.get("CTXSCORE_SANITIZED"):
            assert cpp_peak_mb < 100, (name, cpp_peak_mb)
        assert python_peak_mb < 100, (name, python_peak_mb)
        print(f"{name}: C++ reader peak {cpp_peak_mb} MB, Python reader peak {python_peak_mb} MB")
