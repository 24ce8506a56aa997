"""The context-parallel block scoring in numpy, with upstream's signature:
numpy float32 inputs (exact widenings of bf16), `out` written in place when it
fits [H, >=T, >=L], else fresh scores returned. Planted bugs the checker and
the harness must reject: `cutoff_slack_one` scores one position past the
causal cutoff; `ignores_sm_scale` bakes in upstream's 1/sqrt(128). Four
more are each right within the error bound on any one call, and break one
of the contract's other requirements (CONTRACT.md §4, §5):
`sum_order_per_call` sums in fp32 in an order that changes from call to
call (as atomics do; the n-th call on the same inputs takes the n-th order,
so a replay of a saved case sees what the run that saved it saw),
`sum_order_follows_batch` in an order that follows the batch
size, `masks_by_arithmetic` reads page 0 for a block no position of which
qualifies and masks it with arithmetic, `negative_length_as_huge` reads
a length as unsigned 32 bits, and `rank_sums_in_another_order` sums in fp32
at every rank but 0, so a rank's columns are not bitwise the world-1
columns of their blocks (§9). `page_offset_32_bit` forms a page's element
offset, page × 16384, in 32 bits: right until the cache passes 2^31
elements. Three get the max wrong where only poison or the sign shows it:
`masks_by_adding_minus_inf` scores every position of a page and adds −inf
past the row's prefix (a poisoned position past every reader's reach turns
the max into NaN), `max_starts_at_zero` starts the max at 0 (a row whose
qualifying scores are all negative gets 0), and `max_starts_at_minus_flt_max`
starts it at −FLT_MAX (a row with no qualifying position gets −3.4e38, not
−inf). Two get a refusal wrong (§7): `skips_table_width_check` scores a
table narrower than ceil(max_seq_len / 128), reading past each row, and
`writes_before_refusing` clears `out` before it checks its arguments.
`request_ids_in_16_bits` reads each request's length and table row under
its id as a signed 16-bit integer: right for batches of up to 32768."""
import collections
import hashlib

import numpy as np

from .validation import check_call

LOG2E_LITERAL = 1.4426950409  # the literal SCALE is formed with


def _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out,
            cutoff_slack=0, sum_order=None, mask_by_arithmetic=False, length_bits=None, rank_sum_order=None,
            offset_bits=None, mask_bias=False, max_start=None, skip_checks=(), write_first=False, id_bits=None):
    if write_first and out is not None:  # clears out before it looks at the arguments
        out[...] = 0
    check_call(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, skip_checks)
    if "table_width" in skip_checks:  # reads past a narrow row, as a kernel would: the row's next elements in memory
        table_reach = max(block_table.shape[1], -(-max_seq_len // 128))
        block_table = np.lib.stride_tricks.as_strided(block_table, (block_table.shape[0], table_reach), block_table.strides)
    T, H, _ = idx_q.shape
    P = index_cache.shape[0]
    G = -(-max_seq_len // 128)
    L = -(-G // world_size)
    fits = (out is not None and out.ndim == 3 and out.shape[0] == H and out.shape[1] >= T and out.shape[2] >= L
            and out.dtype == np.float32)
    target = out[:, :T, :L] if fits else np.empty((H, T, L), np.float32)
    scale = np.float64(np.float32(sm_scale * LOG2E_LITERAL))
    if rank_sum_order is not None and rank > 0:
        sum_order = rank_sum_order
    q64 = idx_q.astype(np.float64)  # widened once: exact, as every row's would be
    for i in range(len(seq_lens)):
        # A wrapped id reads another request's length and row (negative ones from the batch's end).
        source = i if id_bits is None else (i + (1 << (id_bits - 1))) % (1 << id_bits) - (1 << (id_bits - 1))
        length = int(seq_lens[source])
        if length_bits is not None:
            length &= (1 << length_bits) - 1
        reach = min(-(-length // 128), G) if length > 0 else 0
        scan = min(L, -(-max(reach - rank, 0) // world_size))
        for j in range(scan):
            b = j * world_size + rank
            page_id = min(max(int(block_table[source, b]), 0), P - 1)
            if offset_bits is not None:  # the element offset wraps in 32 bits; the page it lands in is read
                page_id = int((np.array([page_id], np.int32) * np.int32(128 * 128))[0]) % (P * 128 * 128) // (128 * 128)
            page = index_cache[page_id].astype(np.float64)
            for t in range(max_query_len):
                row = i * max_query_len + t
                n = min(max(length - max_query_len + t + 1 + cutoff_slack - b * 128, 0), 128)
                if mask_by_arithmetic and mask_bias:  # every position scored, −inf added past the prefix
                    with np.errstate(invalid="ignore", over="ignore"):
                        bias = np.where(np.arange(128) < n, 0.0, -np.inf)
                        target[:, row, j] = (scale * (q64[row] @ page.T) + bias).max(axis=1)
                    continue
                if max_start is not None:  # the running max starts at max_start, not −inf
                    dots = q64[row] @ page[:n].T
                    target[:, row, j] = np.maximum((scale * dots).max(axis=1, initial=max_start), max_start)
                    continue
                if n == 0 and mask_by_arithmetic:
                    zero_page = index_cache[0].astype(np.float64)
                    target[:, row, j] = ((q64[row] @ zero_page.T).max(axis=1) * 0.0 - np.inf).astype(np.float32)
                    continue
                if n == 0:
                    target[:, row, j] = -np.inf
                    continue
                if sum_order is not None:  # fp32 products (exact), summed in fp32 in the given order
                    products = idx_q[row][:, None, sum_order] * index_cache[page_id][None, :n, sum_order]
                    sums = np.cumsum(products, axis=2, dtype=np.float32)[:, :, -1]
                    target[:, row, j] = (np.float32(scale) * sums).max(axis=1)
                    continue
                dots = q64[row] @ page[:n].T  # [H, n]
                target[:, row, j] = (scale * dots).max(axis=1).astype(np.float32)
    return out if fits else target


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
           out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out)


def ignores_sm_scale(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                     sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                   0.08838834764831845, out)


def cutoff_slack_one(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                     sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, cutoff_slack=1)


_calls_on_inputs = collections.Counter()


def _inputs_digest(*arguments):
    digest = hashlib.blake2b(digest_size=16)
    for argument in arguments:
        digest.update(repr(argument).encode() if np.isscalar(argument) else np.ascontiguousarray(argument).data)
    return digest.digest()


def sum_order_per_call(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                       sm_scale, out=None):
    key = _inputs_digest(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                         sm_scale)
    _calls_on_inputs[key] += 1
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, sum_order=np.random.default_rng(_calls_on_inputs[key]).permutation(128))


def sum_order_follows_batch(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                            sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, sum_order=np.random.default_rng(len(seq_lens)).permutation(128))


def masks_by_arithmetic(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                        sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, mask_by_arithmetic=True)


def negative_length_as_huge(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                            sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, length_bits=32)


def rank_sums_in_another_order(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                               sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, rank_sum_order=np.arange(127, -1, -1))


def page_offset_32_bit(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                       sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, offset_bits=32)


def masks_by_adding_minus_inf(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                              sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, mask_by_arithmetic=True, mask_bias=True)


def max_starts_at_zero(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                       sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, max_start=0.0)


def max_starts_at_minus_flt_max(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size,
                                max_query_len, sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, max_start=float(-np.finfo(np.float32).max))


def skips_table_width_check(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                            sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, skip_checks=("table_width",))


def writes_before_refusing(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                           sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, write_first=True)


def request_ids_in_16_bits(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                           sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, id_bits=16)
