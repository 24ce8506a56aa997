"""The context-parallel block scoring in plain torch, with upstream's
signature: bf16 queries and cache, int32 table and lengths, fp32 scores, on
any device. Every step depends on the tensors' shapes only, never on their
values, so a call can be recorded into a CUDA graph and replayed for any
batch whose lengths stay within the bound. Sums are fp32 (bf16 products are
exact), so scores land within the contract's bound, not on the exact value.

Dot products are summed in fp64 and rounded to fp32 once: for the
harness's contents every such sum is exact, so a slot's score does not
depend on which other slots share its matrix multiply, and each rank's
column equals its world-1 column bitwise, as the consumer's merge needs.

`geometry` is the launch geometry a port of the upstream kernel would use,
written from CONTRACT.md §6 for the harness's geometry fuzzing.
"""
import torch

from .validation import check_call

LOG2E_LITERAL = 1.4426950409
SLOT_PAGES = 2048  # pages widened to fp64 at once: a bounded working set


def ceil_div(a, b):
    return -((-a) // b)


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale,
           out=None):
    check_call(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len)
    T, H, D = idx_q.shape
    B = seq_lens.shape[0]
    P = index_cache.shape[0]
    G = ceil_div(max_seq_len, 128)
    L = ceil_div(G, world_size)
    device = idx_q.device
    fits = (out is not None and out.dim() == 3 and out.shape[0] == H and out.shape[1] >= T and out.shape[2] >= L
            and out.dtype == torch.float32 and out.device == device)
    if fits:
        target = out[:, :T, :L]
    else:
        if out is not None and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise ValueError(f"out must be fp32 [heads, >=tokens, >=local] on {device}: got {tuple(out.shape)} "
                             f"{out.dtype}; need heads={H} tokens={T} local={L}")
        target = torch.empty((H, T, L), dtype=torch.float32, device=device)
    if T == 0:
        return target
    QL = max_query_len
    scale = sm_scale * LOG2E_LITERAL  # a Python float: the multiply rounds it to fp32 once
    lens = seq_lens.long()
    # Rows of the tile: (request, token) -> causal cutoff.
    cutoff = lens[:, None] - QL + torch.arange(QL, device=device)[None, :] + 1  # [B, QL]
    end = torch.clamp(torch.div(lens + 127, 128, rounding_mode="floor"), max=G)
    scan = torch.clamp(torch.div(torch.clamp(end - rank, min=0) + world_size - 1, world_size, rounding_mode="floor"), max=L)
    q = idx_q.unflatten(0, (B, QL)).reshape(B, QL * H, D).double()  # row (t, h) = t * H + h
    for b0 in range(0, B, SLOT_PAGES):  # requests and slots in passes of at most SLOT_PAGES pages
        b1 = min(B, b0 + SLOT_PAGES)
        nb = b1 - b0
        step = max(1, SLOT_PAGES // nb)
        for j0 in range(0, L, step):
            j = torch.arange(j0, min(L, j0 + step), device=device)  # the slots of this pass
            blocks = j * world_size + rank
            ids = block_table[b0:b1, torch.clamp(blocks, max=G - 1)].long().clamp(0, P - 1)  # [nb, n]
            k = index_cache[ids].double()  # [nb, n, 128, D]
            n = j.numel()
            dots = torch.bmm(q[b0:b1], k.reshape(nb, n * 128, D).transpose(1, 2)).float().reshape(nb, QL, H, n, 128) * scale
            positions = blocks[:, None] * 128 + torch.arange(128, device=device)[None, :]  # [n, 128]
            seen = positions[None, None, :, :] < cutoff[b0:b1, :, None, None]  # [nb, QL, n, 128]
            best = dots.masked_fill(~seen[:, :, None, :, :], float("-inf")).amax(-1)  # [nb, QL, H, n]
            values = best.permute(2, 0, 1, 3).reshape(H, nb * QL, n)
            written = (j[None, :] < scan[b0:b1, None])[:, None, :].expand(nb, QL, n).reshape(nb * QL, n)[None].expand(H, nb * QL, n)
            part = target[:, b0 * QL:b1 * QL, j0:j0 + n]
            part.copy_(torch.where(written, values, part))
    return out if fits else target


def geometry(batch, max_seq_len, world_size, heads, max_query_len):
    """(chunk_count, CHUNK, grid_x, grid_y) of CONTRACT.md §6."""
    G = ceil_div(max_seq_len, 128)
    L = ceil_div(G, world_size)
    if L <= 0:
        chunks = 1
    else:
        target = max(1, (1 << 14) // max(1, batch))
        c = min(1 << (target.bit_length() - 1), L)
        c = min(c, max(1, ceil_div(L, 3)))
        chunks = ceil_div(L, ceil_div(L, c))
    chunks = min(L, chunks)
    chunk = 1 << (ceil_div(L, chunks) - 1).bit_length()
    return chunks, chunk, batch, ceil_div(L, chunk)
