#!/usr/bin/python3
"""Read ctxscore fixtures (fixtures/FORMAT.md) with numpy alone, and check a
Python implementation of the context-parallel block scoring against them.

    python3 tools/ctxscore_fixtures.py check fixtures/corpus --impl module:function

The function is called as

    function(idx_q, index_cache, block_table, seq_lens, max_seq_len=S, rank=r,
             world=w, max_query_len=QL, sm_scale=s, out=out)

with numpy arrays laid out as the fixture stores them (queries and cache as
float32, exact widenings of the bf16 bits; query, table and out strides as
recorded). `out` is float32 [H, >=T, >=L] prefilled with the sentinel; the
function returns the scores (numpy or torch), normally `out` itself. The
result is judged by the stored written mask, sentinel and tolerance.
"""
import argparse
import importlib
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"BF16": (np.uint16, 2), "F32": (np.float32, 4), "I32": (np.int32, 4), "U8": (np.uint8, 1)}
TENSORS = ("idx_q", "index_cache", "block_table", "seq_lens", "expected", "written", "tolerance")


class FixtureError(Exception):
    def __init__(self, path, field, problem):
        super().__init__(f"{path}: {field}: {problem}")


def widen_bf16(bits):
    """bf16 bits (uint16) to float32, exactly."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_fixture(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise FixtureError(path, "header length", f"truncated: {len(raw)} bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if n == 0 or n > len(raw) - 8:
        raise FixtureError(path, "header length", f"{n} bytes, the file has {len(raw) - 8} after the length")
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise FixtureError(path, "header", f"not valid JSON: {e}")
    data = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or meta.get("format") != "ctxscore-fixture" or meta.get("format_version") != "1":
        raise FixtureError(path, "__metadata__", "not a ctxscore fixture of format version 1")
    tensors = {}
    for name in TENSORS:
        entry = header.get(name)
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
            raise FixtureError(path, name, "missing or of an unknown dtype")
        dtype, size = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        if not 0 <= begin <= end <= len(data) or end - begin != int(np.prod(shape, dtype=np.int64)) * size:
            raise FixtureError(path, name, f"data_offsets {[begin, end]} do not hold shape {list(shape)}")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
    return tensors, meta


def strided(dense, strides, fill):
    """A view with the given element strides over a fresh buffer holding `fill`
    outside the view, the dense values inside it."""
    extent = 1 + sum((d - 1) * s for d, s in zip(dense.shape, strides)) if dense.size else 1
    buf = np.full(extent, fill, dtype=dense.dtype)
    view = np.lib.stride_tricks.as_strided(buf, dense.shape, [s * buf.itemsize for s in strides])
    view[...] = dense
    return buf, view


def to_numpy(x):
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def check_one(path, impl):
    t, m = read_fixture(path)
    H, T = t["idx_q"].shape[1], t["idx_q"].shape[0]
    L = t["written"].shape[1]
    B, wt = t["block_table"].shape
    sentinel = np.uint32(int(m["sentinel_bits"], 16)).view(np.float32)
    _, q = strided(widen_bf16(t["idx_q"]), (int(m["q_token_stride"]), int(m["q_head_stride"]), 1), np.float32("nan"))
    cache = widen_bf16(t["index_cache"])
    _, table = strided(t["block_table"], (int(m["table_row_stride"]), 1), np.int32(0))
    out_shape = (H, int(m["out_rows"]), int(m["out_slots"]))
    out_strides = (int(m["out_head_stride"]), int(m["out_row_stride"]), int(m["out_slot_stride"]))
    out_buf, out = strided(np.full(out_shape, sentinel, np.float32), out_strides, sentinel)
    got = to_numpy(impl(q, cache, table, t["seq_lens"].copy(), max_seq_len=int(m["max_seq_len"]), rank=int(m["rank"]),
                        world=int(m["world"]), max_query_len=int(m["max_query_len"]), sm_scale=float(m["sm_scale"]),
                        out=out))
    if got.ndim != 3 or got.shape[0] != H or got.shape[1] < T or got.shape[2] < L:
        return False, f"returned shape {list(got.shape)}, expected [{H}, >={T}, >={L}]", 0.0
    got = got[:, :T, :L].astype(np.float32)
    exp, tol = t["expected"], t["tolerance"].astype(np.float64)
    written = np.broadcast_to(t["written"].astype(bool), exp.shape)
    neg = written & np.isneginf(exp)
    fin = written & np.isfinite(exp)
    problems = []
    bad_neg = neg & ~np.isneginf(got)
    if bad_neg.any():
        problems.append(f"{int(bad_neg.sum())} slots should be -inf (first at [h,row,slot] {list(np.argwhere(bad_neg)[0])})")
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - exp.astype(np.float64))
    bad_fin = fin & ~(np.isfinite(got) & (err <= tol))
    ratio = float(np.max(np.where(fin & (tol > 0), err / np.where(tol > 0, tol, 1), 0), initial=0.0))
    if bad_fin.any():
        h, r, j = np.argwhere(bad_fin)[0]
        problems.append(f"{int(bad_fin.sum())} scores outside tolerance (first [h={h},row={r},slot={j}]: "
                        f"got {got[h, r, j]!r}, expected {exp[h, r, j]!r} ± {tol[h, r, j]:.3g})")
    unwritten = ~written & (got.view(np.uint32) != np.float32(sentinel).view(np.uint32))
    if unwritten.any():
        problems.append(f"{int(unwritten.sum())} unwritten slots changed (first at {list(np.argwhere(unwritten)[0])})")
    outside = np.ones(out_buf.shape, bool)
    outside[np.lib.stride_tricks.as_strided(np.arange(out_buf.size), out_shape, [s * 8 for s in out_strides])[:, :T, :L].ravel()] = False
    if (out_buf[outside].view(np.uint32) != np.float32(sentinel).view(np.uint32)).any():
        problems.append("elements of out outside [:, :T, :L] changed")
    return not problems, "; ".join(problems), ratio


def load_impl(spec):
    if ":" not in spec:
        raise SystemExit(f"--impl: \"{spec}\", expected module:function")
    module, function = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as e:
        raise SystemExit(f"--impl: cannot load {spec}: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="judge an implementation against fixtures; exit 1 on any failure")
    c.add_argument("paths", nargs="+", help="fixture files or directories")
    c.add_argument("--impl", required=True, help="module:function of the implementation under test")
    args = ap.parse_args()
    impl = load_impl(args.impl)
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".safetensors"))
        elif os.path.exists(p):
            files.append(p)
        else:
            raise SystemExit(f"{p}: does not exist")
    if not files:
        raise SystemExit("no .safetensors fixtures found")
    failures, worst = 0, 0.0
    for f in files:
        try:
            ok, why, ratio = check_one(f, impl)
        except FixtureError as e:
            ok, why, ratio = False, str(e), 0.0
        except Exception as e:  # the implementation under test raised
            ok, why, ratio = False, f"{type(e).__name__}: {e}", 0.0
        worst = max(worst, ratio)
        failures += not ok
        print(f"{'ok' if ok else 'FAIL':5} {os.path.basename(f):48} worst ratio {ratio:.3g}" + ("" if ok else f"\n      {why}"))
    print(f"{len(files)} fixtures, {failures} failing, worst error/tolerance ratio {worst:.3g} ({args.impl})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
