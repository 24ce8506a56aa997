"""Check an implementation against ctxscore fixtures, with numpy alone (and
torch when it is importable):

    python3 -m ctxscore.check fixtures/corpus --impl module:function [--tensors numpy|torch] [--device cuda]

The function is called with upstream's exact positional signature,

    function(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank,
             world_size, max_query_len, sm_scale, out=out)

once with `out` a strided view into a larger sentinel-filled buffer (the
function writes in place) and once with out=None (it returns fresh
[H, >=T, >=L] scores). Tensors are torch bf16/int32/fp32 on --device when
torch is importable, else numpy float32 (exact widenings of bf16). A fixture
that does not read is reported as BAD, apart from an implementation that
fails (FAIL). Exit status as the ctxscore CLI's: 0 passed, 1 a call
failed, 2 bad usage or a fixture that does not read (when no call
failed). Fixtures of format 2 also judge the implementation's local top-k
selection under both tie rules, near-ties exempt.
"""
import argparse
import os
import sys

import numpy as np

from . import fixture as fx
from . import selection
from .port import load
from .tensors import Buffers, to_numpy, torch_available
from .wire_format import ESCAPE


def printable(text):
    """Control characters (and DEL) escaped as wire_format.json's escape rule
    says: text from a file reaches the terminal only so."""
    return "".join(c if ESCAPE["control_below"] <= ord(c) != ESCAPE["delete"]
                   else f"{ESCAPE['prefix']}{ord(c):0{ESCAPE['hex_digits']}x}" for c in text)


def judge_scores(f, got, sentinel_storage=None, out_storage=None):
    """(problems, worst error/tolerance ratio) for scores [H, >=T, >=L]; with
    out_storage, also every element outside the written set kept its bits."""
    t = f.t
    T, L = f.T, f.L
    if got.ndim != 3 or got.shape[0] != f.H or got.shape[1] < T or got.shape[2] < L:
        return [f"returned shape {list(got.shape)}, expected [{f.H}, >={T}, >={L}]"], 0.0
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
    if out_storage is not None:
        bits = lambda a: np.asarray(a, np.float32).view(np.uint32)
        offsets = np.lib.stride_tricks.as_strided(np.arange(out_storage.size), f.out_shape,
                                                  [s * 8 for s in f.out_strides])
        inside = np.zeros(out_storage.size, bool)
        inside[offsets[:, :T, :L][written].ravel()] = True
        changed = ~inside & (bits(out_storage) != bits(sentinel_storage))
        if changed.any():
            problems.append(f"{int(changed.sum())} elements the contract does not write changed (first at storage offset "
                            f"{int(np.argwhere(changed)[0][0])})")
    if f.has_selection and not problems:
        problems += judge_selection(f, got)
    return problems, ratio


def judge_selection(f, got):
    """The implementation's local top-k against the fixture's, both tie rules."""
    dense = np.where(np.broadcast_to(f.t["written"].astype(bool), got.shape), got, np.float32(np.nan))
    p = f.selection_params()
    problems = []
    for tie, stored in ((selection.HIGHER, "selection_higher"), (selection.LOWER, "selection_lower")):
        mine = selection.local_selection(dense, f.t["seq_lens"], f.QL, f.rank, f.world, f.G, p, tie)
        n, first = selection.judge(mine, f.t[stored], f.t["expected"], f.t["tolerance"], f.t["seq_lens"], f.QL,
                                   f.rank, f.world, f.G, p)
        if n:
            problems.append(f"top-{p['k']} ({tie}): {n} rows select other blocks, no near-tie explains it ({first})")
    return problems


def call(f, impl, buffers, with_out):
    """Calls impl on the fixture's case; returns (problems, ratio)."""
    t = f.t
    q_storage, _ = fx.strided(t["idx_q"], f.q_strides, np.uint16(0x7FC0))
    table_storage, _ = fx.strided(t["block_table"], (f.table_row_stride, 1), np.int32(0))
    q, _ = buffers.view(q_storage, t["idx_q"].shape, f.q_strides, "bf16")
    cache, _ = buffers.view(t["index_cache"].reshape(-1), t["index_cache"].shape, (16384, 128, 1), "bf16")
    table, _ = buffers.view(table_storage, t["block_table"].shape, (f.table_row_stride, 1), "i32")
    lens, _ = buffers.view(t["seq_lens"], t["seq_lens"].shape, (1,), "i32")
    if not with_out:
        got = impl(q, cache, table, lens, f.S, f.rank, f.world, f.QL, f.sm_scale, out=None)
        buffers.synchronize()
        if got is None:
            return ["returned None for out=None, expected fresh scores"], 0.0
        return judge_scores(f, to_numpy(got))
    sentinel_storage, _ = fx.strided(np.full(f.out_shape, f.sentinel, np.float32), f.out_strides, f.sentinel)
    out, out_base = buffers.view(sentinel_storage, f.out_shape, f.out_strides, "f32")
    impl(q, cache, table, lens, f.S, f.rank, f.world, f.QL, f.sm_scale, out=out)
    buffers.synchronize()
    after = buffers.storage_values(out_base)
    view = np.lib.stride_tricks.as_strided(after, f.out_shape, [s * 4 for s in f.out_strides])
    return judge_scores(f, np.array(view), sentinel_storage, after)


FAILED, BAD_INPUT = 1, 2  # the exit statuses of the ctxscore CLI


def bad_input(message):
    print(f"python3 -m ctxscore.check: {printable(message)}", file=sys.stderr)
    return BAD_INPUT


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ctxscore.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="fixture files or directories")
    ap.add_argument("--impl", required=True, help="module:function of the implementation under test")
    ap.add_argument("--tensors", choices=("numpy", "torch"), help="what the function receives (default: torch if importable)")
    ap.add_argument("--device", default="cpu", help="torch device of the tensors (cpu, cuda)")
    args = ap.parse_args(argv)
    try:
        impl = load(args.impl, "--impl")
    except SystemExit as e:
        return bad_input(str(e))
    buffers = Buffers(args.tensors or ("torch" if torch_available() else "numpy"), args.device)
    try:
        files = fx.files_under(args.paths)
    except FileNotFoundError as e:
        return bad_input(str(e))
    if not files:
        return bad_input("no .safetensors fixtures found")
    failures = bad = 0
    worst = 0.0
    for path in files:
        name = printable(os.path.basename(path))  # a hostile file name reaches the terminal escaped
        try:
            f = fx.read(path)
        except fx.FixtureError as e:
            bad += 1
            print(f"BAD   {name:48} malformed fixture: {printable(str(e))}")
            continue
        except Exception as e:  # a reader defect must still leave a verdict, and the other files judged
            bad += 1
            print(f"BAD   {name:48} the reader failed ({type(e).__name__}): {printable(str(e))}")
            continue
        for with_out in (True, False):
            label = name + ("" if with_out else " out=None")
            try:
                problems, ratio = call(f, impl, buffers, with_out)
            except Exception as e:  # the implementation under test raised
                problems, ratio = [f"raised {type(e).__name__}: {e}"], 0.0
            worst = max(worst, ratio)
            failures += bool(problems)
            print(f"{'ok' if not problems else 'FAIL':5} {label:57} worst ratio {ratio:.3g}" +
                  ("" if not problems else "\n      " + printable("; ".join(problems))))
    print(f"{len(files)} fixtures ({buffers.kind} tensors), {failures} failing calls, {bad} malformed fixtures, "
          f"worst error/tolerance ratio {worst:.3g} ({args.impl})")
    return FAILED if failures else BAD_INPUT if bad else 0


if __name__ == "__main__":
    sys.exit(main())
