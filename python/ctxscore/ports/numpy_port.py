"""The context-parallel block scoring in numpy, with upstream's signature:
numpy float32 inputs (exact widenings of bf16), `out` written in place when it
fits [H, >=T, >=L], else fresh scores returned. Planted bugs the checker and
the harness must reject: `cutoff_slack_one` scores one position past the
causal cutoff; `ignores_sm_scale` bakes in upstream's 1/sqrt(128)."""
import numpy as np

LOG2E_LITERAL = 1.4426950409  # the literal SCALE is formed with


def _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out,
            cutoff_slack):
    T, H, _ = idx_q.shape
    P = index_cache.shape[0]
    G = -(-max_seq_len // 128)
    L = -(-G // world_size)
    fits = (out is not None and out.ndim == 3 and out.shape[0] == H and out.shape[1] >= T and out.shape[2] >= L
            and out.dtype == np.float32)
    target = out[:, :T, :L] if fits else np.empty((H, T, L), np.float32)
    scale = np.float64(np.float32(sm_scale * LOG2E_LITERAL))
    for i, length in enumerate(int(x) for x in seq_lens):
        reach = min(-(-length // 128), G) if length > 0 else 0
        scan = min(L, -(-max(reach - rank, 0) // world_size))
        for j in range(scan):
            b = j * world_size + rank
            page = index_cache[min(max(int(block_table[i, b]), 0), P - 1)].astype(np.float64)
            for t in range(max_query_len):
                row = i * max_query_len + t
                n = min(max(length - max_query_len + t + 1 + cutoff_slack - b * 128, 0), 128)
                if n == 0:
                    target[:, row, j] = -np.inf
                    continue
                dots = idx_q[row].astype(np.float64) @ page[:n].T  # [H, n]
                target[:, row, j] = (scale * dots).max(axis=1).astype(np.float32)
    return out if fits else target


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
           out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, cutoff_slack=0)


def ignores_sm_scale(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                     sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                   0.08838834764831845, out, cutoff_slack=0)


def cutoff_slack_one(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                     sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, cutoff_slack=1)
