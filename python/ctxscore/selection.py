"""The consumer's local top-k (CONTRACT.md §9) over one rank's scores, and
the near-tie judgement of two selections, with numpy alone. An independent
implementation of what reference/src/selection.cpp does: every fixture of
format 2 stores the C++ selection, and the checker holds this one to it."""
import numpy as np

HIGHER, LOWER = "higher_block_first", "lower_block_first"


def ceil_div(a, b):
    return -((-a) // b)


def causal_blocks(length, query_len, token):
    return ceil_div(length - query_len + token + 1, 128)


def ordered_bits(score):
    """fp32 bits mapped so that unsigned order is score order; -0 as +0, NaN as 0."""
    s = np.float32(score)
    if np.isnan(s):
        return 0
    u = int(np.array([s], np.float32).view(np.uint32)[0])
    if u == 0x80000000:
        u = 0
    return u ^ (0xFFFFFFFF if u & 0x80000000 else 0x80000000)


def _forced(score, block, cb, p):
    if block < p["init_blocks"]:
        return p["init_score"]
    if block >= max(0, cb - p["local_keep"]):
        return p["local_score"]
    return score


def _key(score, block, tie):
    field = block + 1 if tie == HIGHER else 0xFFFF - block
    return (1 << 48) | (ordered_bits(score) << 16) | field


def local_selection(scores, lens, query_len, rank, world, global_blocks, p, tie):
    """Block ids [H, T, k] of one rank's local top-k; scores is dense [H, T, L]."""
    H, T, L = scores.shape
    k = p["k"]
    out = np.full((H, T, k), -1, np.int32)
    for row in range(T):
        cb = causal_blocks(int(lens[row // query_len]), query_len, row % query_len)
        scan_t = min(L, ceil_div(max(cb - rank, 0), world))
        for h in range(H):
            keys = []
            for j in range(scan_t):
                b = j * world + rank
                if b < global_blocks and b < cb:
                    keys.append((_key(_forced(scores[h, row, j], b, cb, p), b, tie), b))
            keys.sort(reverse=True)
            for e, (_, b) in enumerate(keys[:k]):
                out[h, row, e] = b
    return out


def margins(expected, tolerance, lens, query_len, rank, world, global_blocks, p):
    """[H, T] fp32: each row's (s_k - s_{k+1}) / (tolerance_k + tolerance_{k+1})
    over its candidates ranked by `expected` (forced ones at their forced
    score, tolerance 0); FLT_MAX where there is no (k+1)-th candidate or the
    two tolerances are 0 (FORMAT.md's selection_margin)."""
    H, T, L = expected.shape
    k, flt_max = p["k"], float(np.finfo(np.float32).max)
    out = np.empty((H, T), np.float32)
    for row in range(T):
        cb = causal_blocks(int(lens[row // query_len]), query_len, row % query_len)
        scan_t = min(L, ceil_div(max(cb - rank, 0), world))
        slots = [(j, j * world + rank) for j in range(scan_t) if j * world + rank < min(global_blocks, cb)]
        for h in range(H):
            cands = []
            for j, b in slots:
                if b < p["init_blocks"] or b >= max(0, cb - p["local_keep"]):
                    cands.append((float(_forced(0.0, b, cb, p)), 0.0))
                else:
                    cands.append((float(expected[h, row, j]), float(tolerance[h, row, j])))
            cands.sort(key=lambda c: -c[0])
            m = 1e300
            if len(cands) > k and cands[k - 1][1] + cands[k][1] > 0:
                m = (cands[k - 1][0] - cands[k][0]) / (cands[k - 1][1] + cands[k][1])
            out[h, row] = flt_max if m >= flt_max else m
    return out


def judge(got, want, expected, tolerance, lens, query_len, rank, world, global_blocks, p):
    """(unexplained differences, first one as text or None): a different block set
    is allowed only where every block one selects and the other does not has an
    expected score within the sum of the two tolerances of the other's."""
    H, T, _ = got.shape
    unexplained, first = 0, None
    for h in range(H):
        for row in range(T):
            gs = {int(b) for b in got[h, row] if b >= 0}
            ws = {int(b) for b in want[h, row] if b >= 0}
            if gs == ws:
                continue
            cb = causal_blocks(int(lens[row // query_len]), query_len, row % query_len)

            def value(b):
                j = (b - rank) // world
                forced = b < p["init_blocks"] or b >= max(0, cb - p["local_keep"])
                if forced:
                    return float(_forced(0.0, b, cb, p)), 0.0
                return float(expected[h, row, j]), float(tolerance[h, row, j])

            why = None
            if len(gs) != len(ws):
                why = f"selected {len(gs)} blocks, expected {len(ws)}"
            for x in sorted(gs - ws):
                if why:
                    break
                if (x - rank) % world or not 0 <= x < min(global_blocks, cb):
                    why = f"selected block {x}, which is not a candidate of this row"
                    break
                ex, tx = value(x)
                for y in sorted(ws - gs):
                    ey, ty = value(y)
                    if ey - ex > tx + ty:
                        why = (f"selected block {x} (expected {ex:.9g} ± {tx:.3g}) over block {y} "
                               f"(expected {ey:.9g} ± {ty:.3g})")
                        break
            if why:
                unexplained += 1
                first = first or f"head {h} row {row}: {why}"
    return unexplained, first
