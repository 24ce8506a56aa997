"""The numpy port (or its planted bug), appending each call's compile key
(H, QL, world, rank, CHUNK, N, sm_scale) to the file $RECORD_KEYS_TO: what a
kernel specializing on upstream's constexpr set would compile for."""
import os

from ctxscore.ports import numpy_port


def _chunk(batch, max_seq_len, world):
    """CHUNK of CONTRACT.md section 6, restated here so the record does not trust the harness."""
    blocks = -(-max_seq_len // 128)
    local = -(-blocks // world)
    target = max(1, (1 << 14) // max(1, batch))
    c = min(1 << (target.bit_length() - 1), local)
    c = min(c, max(1, -(-local // 3)))
    chunks = min(local, -(-local // -(-local // c)))
    return 1 << (-(-local // chunks) - 1).bit_length()


def _record(idx_q, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale):
    heads = idx_q.shape[1]
    n = max(16, 1 << (heads * max_query_len - 1).bit_length())
    key = (heads, max_query_len, world_size, rank, _chunk(len(seq_lens), max_seq_len, world_size), n, sm_scale)
    with open(os.environ["RECORD_KEYS_TO"], "a") as f:
        f.write(" ".join(str(k) for k in key) + "\n")


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out=None):
    _record(idx_q, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale)
    return numpy_port.scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                             sm_scale, out)


def cutoff_slack_one(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                     out=None):
    _record(idx_q, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale)
    return numpy_port.cutoff_slack_one(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size,
                                       max_query_len, sm_scale, out)
