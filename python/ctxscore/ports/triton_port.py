"""An independent Triton port of the context-parallel block scoring, written
from CONTRACT.md with upstream's signature: one program per (request,
chunk), the query tile in registers, each slot's 128 x 128 page through
`tl.dot` (fp32 sums), masked to the causal prefix, the max stored in place.
`geometry` reports the launch it makes. Runs wherever Triton runs (CUDA and
ROCm builds of torch).

`scores` compiles one kernel per (CHUNK, N). `specializing_scores` is the
same arithmetic compiled as upstream's kernel is, with HEADS, QUERY_LEN,
RANK, WORLD, CHUNK, N and SCALE as compile-time constants: one JIT compile
per distinct set, which is what `ctxscore fuzz --compile-keys` exists for.

`planted_*` are the same port with one bug each, the mutants the harness
must kill through the port protocol (ci/gpu mutants): addressing, masking,
the written-slot set, the fresh-out path, the launch geometry, and a
geometry cached from the first call (what graph capture on a dummy batch
would bake in), per-call scratch allocated under a stream of the port's own
during capture, and a workspace the port lets go once a capture has used it
(what a replay after the allocator moved writes through).
"""
import torch
import triton
import triton.language as tl

from .validation import check_call

LOG2E_LITERAL = 1.4426950409
TARGET_GRID, MIN_BLOCKS = 1 << 14, 3

# Planted bugs, one per number (0: none).
(NONE, QUERY_TOKEN_STRIDE, CUTOFF_INCLUSIVE, PAST_SCAN, FRESH_LAYOUT, CHUNK_ROUNDED_DOWN, GEOMETRY_CACHED,
 SCRATCH_OUTSIDE_POOL, WORKSPACE_RELEASED_AFTER_CAPTURE) = range(9)


# One program (request i, chunk c): shared by both kernels below, which
# differ only in what they compile as constants.
@triton.jit
def _score_program(q_ptr, cache_ptr, table_ptr, lens_ptr, out_ptr, q_token_stride, q_head_stride, table_stride,
                   out_head_stride, out_row_stride, out_slot_stride, local_slots, global_blocks, num_pages, heads,
                   query_len, rank, world, scale, CHUNK: tl.constexpr, N: tl.constexpr, BUG: tl.constexpr):
    i = tl.program_id(0)
    c = tl.program_id(1)
    length = tl.load(lens_ptr + i)
    end = tl.minimum(tl.cdiv(length, 128), global_blocks)  # blocks the request reaches
    scan = tl.minimum(local_slots, tl.cdiv(tl.maximum(end - rank, 0), world))
    if BUG == 3:
        scan = local_slots
    n = tl.arange(0, N)
    token = n // heads
    head = n % heads
    live = n < heads * query_len
    row = i * query_len + token
    d = tl.arange(0, 128)
    if BUG == 1:
        q_rows = row.to(tl.int64) * heads * q_head_stride + head * q_head_stride
    else:
        q_rows = row.to(tl.int64) * q_token_stride + head * q_head_stride
    q = tl.load(q_ptr + q_rows[:, None] + d[None, :], mask=live[:, None], other=0.0)  # [N, 128] bf16
    cutoff = length - query_len + token + 1  # [N]: positions before it qualify
    pos = tl.arange(0, 128)
    out_rows = head.to(tl.int64) * out_head_stride + row.to(tl.int64) * out_row_stride
    first = c * CHUNK
    last = tl.minimum(first + CHUNK, scan)
    for j in range(first, last):
        b = j * world + rank
        page = tl.load(table_ptr + i.to(tl.int64) * table_stride + b)
        page = tl.minimum(tl.maximum(page, 0), num_pages - 1).to(tl.int64)
        k = tl.load(cache_ptr + page * 16384 + pos[:, None] * 128 + d[None, :])  # [128, 128] bf16
        s = tl.dot(q, tl.trans(k)) * scale  # [N, 128] fp32
        if BUG == 2:
            seen = (b * 128 + pos)[None, :] <= cutoff[:, None]
        else:
            seen = (b * 128 + pos)[None, :] < cutoff[:, None]
        best = tl.max(tl.where(seen, s, float("-inf")), axis=1)
        tl.store(out_ptr + out_rows + j.to(tl.int64) * out_slot_stride, best, mask=live)


# Integer arguments are not specialized on their values: one compiled kernel
# per (CHUNK, N), not one per case.
@triton.jit(do_not_specialize=["q_token_stride", "q_head_stride", "table_stride", "out_head_stride", "out_row_stride",
                               "out_slot_stride", "local_slots", "global_blocks", "num_pages", "heads", "query_len",
                               "rank", "world"])
def _context_score(q_ptr, cache_ptr, table_ptr, lens_ptr, out_ptr, q_token_stride, q_head_stride, table_stride,
                   out_head_stride, out_row_stride, out_slot_stride, local_slots, global_blocks, num_pages, heads,
                   query_len, rank, world, scale, CHUNK: tl.constexpr, N: tl.constexpr, BUG: tl.constexpr):
    _score_program(q_ptr, cache_ptr, table_ptr, lens_ptr, out_ptr, q_token_stride, q_head_stride, table_stride,
                   out_head_stride, out_row_stride, out_slot_stride, local_slots, global_blocks, num_pages, heads,
                   query_len, rank, world, scale, CHUNK, N, BUG)


# Upstream's constant set: every (HEADS, QUERY_LEN, RANK, WORLD, CHUNK, N,
# SCALE) is a kernel of its own.
@triton.jit
def _context_score_specialized(q_ptr, cache_ptr, table_ptr, lens_ptr, out_ptr, q_token_stride, q_head_stride,
                               table_stride, out_head_stride, out_row_stride, out_slot_stride, local_slots,
                               global_blocks, num_pages, HEADS: tl.constexpr, QUERY_LEN: tl.constexpr,
                               RANK: tl.constexpr, WORLD: tl.constexpr, SCALE: tl.constexpr, CHUNK: tl.constexpr,
                               N: tl.constexpr, BUG: tl.constexpr):
    _score_program(q_ptr, cache_ptr, table_ptr, lens_ptr, out_ptr, q_token_stride, q_head_stride, table_stride,
                   out_head_stride, out_row_stride, out_slot_stride, local_slots, global_blocks, num_pages, HEADS,
                   QUERY_LEN, RANK, WORLD, SCALE, CHUNK, N, BUG)


def _chunks(batch, local):
    """The chunk count one score row is split across (CONTRACT.md section 6)."""
    if local <= 0:
        return 1
    target = max(1, TARGET_GRID // max(1, batch))
    c = min(1 << (target.bit_length() - 1), local)
    c = min(c, max(1, triton.cdiv(local, MIN_BLOCKS)))
    return triton.cdiv(local, triton.cdiv(local, c))


def _launch_geometry(batch, max_seq_len, world_size, bug):
    blocks = triton.cdiv(max_seq_len, 128)
    local = triton.cdiv(blocks, world_size)
    chunks = min(local, _chunks(batch, local))
    if bug == CHUNK_ROUNDED_DOWN:
        per = triton.cdiv(local, chunks)
        return chunks, 1 << (per.bit_length() - 1), chunks
    chunk = triton.next_power_of_2(triton.cdiv(local, chunks))
    return chunks, chunk, triton.cdiv(local, chunk)


_first_geometry = {}
_scratch_streams = {}
_workspaces = {}


def _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out,
            bug, specialize=False):
    check_call(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len)
    tokens, heads, _ = idx_q.shape
    batch = seq_lens.numel()
    blocks = triton.cdiv(max_seq_len, 128)
    local = triton.cdiv(blocks, world_size)
    out_ok = (out is not None and out.ndim == 3 and out.shape[0] == heads and out.shape[1] >= tokens
              and out.shape[2] >= local and out.dtype == torch.float32 and out.device == idx_q.device)
    if out_ok:
        scores = out[:, :tokens, :local]
        strides = scores.stride()
    else:
        if out is not None and torch.cuda.is_current_stream_capturing():
            raise ValueError(f"out must be fp32 [heads, >=tokens, >=local] on device: got {tuple(out.shape)} "
                             f"{out.dtype} {out.device}; need heads={heads} tokens={tokens} local={local}")
        scores = torch.empty((heads, tokens, local), dtype=torch.float32, device=idx_q.device)
        strides = scores.stride()
        if bug == FRESH_LAYOUT:  # the fresh buffer written token-major, as if it were [T, H, L]
            strides = (local, heads * local, 1)
    target = scores
    if bug == SCRATCH_OUTSIDE_POOL:
        # Scores staged in per-call scratch allocated under a stream of the
        # port's own: right in eager calls (every use is ordered on the
        # calling stream). Under capture the scratch is not the graph's:
        # torch empties its cache before a capture, so the allocation needs
        # the driver, and the capture fails.
        side = _scratch_streams.setdefault(idx_q.device, torch.cuda.Stream(idx_q.device))
        with torch.cuda.stream(side):
            scores = torch.empty((heads, tokens, local), dtype=torch.float32, device=idx_q.device)
        strides = scores.stride()
    if bug == WORKSPACE_RELEASED_AFTER_CAPTURE:
        # Scores staged in a workspace the port keeps between calls (16 MiB,
        # or what a call needs): right in eager calls. A capture takes the
        # workspace and the port lets it go, as if the graph now owned it;
        # a graph owns only what its own pool gave it, so a replay writes
        # through the freed workspace into whatever took its place.
        need = heads * tokens * local
        capturing = torch.cuda.is_current_stream_capturing()
        work = _workspaces.pop(idx_q.device, None) if capturing else _workspaces.get(idx_q.device)
        if work is None or work.numel() < need:
            work = torch.empty(max(need, 4 << 20), dtype=torch.float32, device=idx_q.device)
        if not capturing:
            _workspaces[idx_q.device] = work
        scores = work[:need].view(heads, tokens, local)
        scores.copy_(target)  # the unwritten slots keep what the caller's out holds
        strides = scores.stride()
    if tokens:
        if bug == GEOMETRY_CACHED:
            chunks, chunk, grid_y = _first_geometry.setdefault("launch", _launch_geometry(batch, max_seq_len, world_size, NONE))
        else:
            chunks, chunk, grid_y = _launch_geometry(batch, max_seq_len, world_size, bug)
        n = max(16, triton.next_power_of_2(heads * max_query_len))
        common = (idx_q, index_cache, block_table, seq_lens, scores, idx_q.stride(0), idx_q.stride(1),
                  block_table.stride(0), strides[0], strides[1], strides[2], local, blocks, index_cache.shape[0])
        if specialize:
            _context_score_specialized[(batch, grid_y)](*common, HEADS=heads, QUERY_LEN=max_query_len, RANK=rank,
                                                        WORLD=world_size, SCALE=sm_scale * LOG2E_LITERAL, CHUNK=chunk,
                                                        N=n, BUG=bug)
        else:
            _context_score[(batch, grid_y)](*common, heads, max_query_len, rank, world_size, sm_scale * LOG2E_LITERAL,
                                            CHUNK=chunk, N=n, BUG=bug)
    if target is not scores:
        target.copy_(scores)
    return target


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out=None):
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, NONE)


def specializing_scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                        sm_scale, out=None):
    """`scores`, compiled per upstream's constant set (one JIT compile per compile key)."""
    return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
                   out, NONE, specialize=True)


def geometry(batch, max_seq_len, world_size, heads, max_query_len):
    """(chunk count, CHUNK, grid_x, grid_y) this port launches."""
    chunks, chunk, grid_y = _launch_geometry(batch, max_seq_len, world_size, NONE)
    return chunks, chunk, batch, grid_y


def _planted(bug):
    def port(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
             out=None):
        return _scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                       sm_scale, out, bug)
    return port


planted_query_token_stride = _planted(QUERY_TOKEN_STRIDE)  # addressing: a token's stride taken as heads x head stride
planted_cutoff_inclusive = _planted(CUTOFF_INCLUSIVE)  # masking: the position at the cutoff scored
planted_writes_past_scan = _planted(PAST_SCAN)  # written set: slots past scan scored too
planted_fresh_layout = _planted(FRESH_LAYOUT)  # fresh-out path: the fresh buffer laid out token-major
planted_chunk_rounded_down = _planted(CHUNK_ROUNDED_DOWN)  # geometry: CHUNK rounded down, the last slots dropped
planted_geometry_cached = _planted(GEOMETRY_CACHED)  # capture: the first call's geometry reused by every call
planted_scratch_outside_pool = _planted(SCRATCH_OUTSIDE_POOL)  # capture: per-call scratch outside the graph's pool
planted_workspace_released_after_capture = _planted(WORKSPACE_RELEASED_AFTER_CAPTURE)  # capture: the graph's workspace freed


def planted_chunk_rounded_down_geometry(batch, max_seq_len, world_size, heads, max_query_len):
    chunks, chunk, grid_y = _launch_geometry(batch, max_seq_len, world_size, CHUNK_ROUNDED_DOWN)
    return chunks, chunk, batch, grid_y
