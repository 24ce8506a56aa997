"""A small numpy implementation of the context-parallel block scoring, used
as a port under test of tools/ctxscore_fixtures.py; `broken` scores one
position past the causal cutoff, which the checker must reject."""
import numpy as np

LOG2E_LITERAL = 1.4426950409  # the literal SCALE is formed with


def _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world, max_query_len, sm_scale, out,
            cutoff_slack):
    T, H, _ = idx_q.shape
    P = index_cache.shape[0]
    G = -(-max_seq_len // 128)
    L = -(-G // world)
    scale = np.float64(np.float32(sm_scale * LOG2E_LITERAL))
    for i, length in enumerate(int(x) for x in seq_lens):
        reach = min(-(-length // 128), G) if length > 0 else 0
        scan = min(L, -(-max(reach - rank, 0) // world))
        for j in range(scan):
            b = j * world + rank
            page = index_cache[min(max(int(block_table[i, b]), 0), P - 1)].astype(np.float64)
            for t in range(max_query_len):
                row = i * max_query_len + t
                n = min(max(length - max_query_len + t + 1 + cutoff_slack - b * 128, 0), 128)
                if n == 0:
                    out[:, row, j] = -np.inf
                    continue
                dots = idx_q[row].astype(np.float64) @ page[:n].T  # [H, n]
                out[:, row, j] = (scale * dots).max(axis=1).astype(np.float32)
    return out


def scores(*args, **kw):
    return _scores(*args, **kw, cutoff_slack=0)


def broken(*args, **kw):
    return _scores(*args, **kw, cutoff_slack=1)
