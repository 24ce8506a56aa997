"""The argument checks of this package's ports, written from CONTRACT.md §7
for numpy arrays (bf16 widened to float32) and torch tensors: each raises
ValueError naming the argument, the value seen and what was expected,
before anything is read or written. The harness's refusals check holds
every port to these clauses."""
import numpy as np


def _is_torch(x):
    return hasattr(x, "dtype") and hasattr(x, "device") and hasattr(x, "stride") and callable(x.stride)


def _strides(x):
    if _is_torch(x):
        return tuple(x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def _dtype_is(x, want):
    """`want`: bf16, i32. numpy carries bf16 widened to float32."""
    if _is_torch(x):
        import torch

        return x.dtype == {"bf16": torch.bfloat16, "i32": torch.int32}[want]
    return x.dtype == {"bf16": np.float32, "i32": np.int32}[want]


def _dense(x):
    expect = 1
    for n, s in zip(reversed(tuple(x.shape)), reversed(_strides(x))):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _fail(arg, seen, expected):
    raise ValueError(f"{arg}: got {seen}, expected {expected}")


def _describe(x):
    return f"{x.dtype} {list(x.shape)} strides {list(_strides(x))}"


def check_call(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
               skip=()):
    """Every clause of §7 but the out clauses (an out that does not fit means
    a fresh buffer outside a capture). `skip`: clause names left out, for
    planted ports."""
    if idx_q.ndim != 3 or idx_q.shape[2] != 128:
        _fail("idx_q", _describe(idx_q), "[tokens, heads, 128]")
    if not _dtype_is(idx_q, "bf16"):
        _fail("idx_q", idx_q.dtype, "bf16")
    if _strides(idx_q)[2] != 1:
        _fail("idx_q", f"D stride {_strides(idx_q)[2]}", "D stride 1")
    if index_cache.ndim != 3 or index_cache.shape[1] != 128 or index_cache.shape[2] != 128:
        _fail("index_cache", _describe(index_cache), "[pages, 128, 128]")
    if index_cache.shape[0] < 1:
        _fail("index_cache", f"{index_cache.shape[0]} pages", "at least 1 page")
    if not _dense(index_cache):
        _fail("index_cache", f"strides {list(_strides(index_cache))}", "dense strides (16384, 128, 1)")
    if not _dtype_is(index_cache, "bf16"):
        _fail("index_cache", index_cache.dtype, "bf16")
    if block_table.ndim != 2:
        _fail("block_table", _describe(block_table), "2 dims [batch, width]")
    if not _dtype_is(block_table, "i32"):
        _fail("block_table", block_table.dtype, "int32")
    if _strides(block_table)[1] != 1:
        _fail("block_table", f"column stride {_strides(block_table)[1]}", "column stride 1")
    if seq_lens.ndim != 1:
        _fail("seq_lens", _describe(seq_lens), "1 dim [batch]")
    if not _dtype_is(seq_lens, "i32"):
        _fail("seq_lens", seq_lens.dtype, "int32")
    if not _dense(seq_lens):
        _fail("seq_lens", f"stride {_strides(seq_lens)[0]}", "stride 1")
    if _is_torch(idx_q):
        for name, x in (("index_cache", index_cache), ("block_table", block_table), ("seq_lens", seq_lens)):
            if x.device != idx_q.device:
                _fail(name, f"device {x.device}", f"idx_q's device {idx_q.device}")
    if world_size < 1:
        _fail("world_size", world_size, ">= 1")
    if not 0 <= rank < world_size:
        _fail("rank", rank, f"0 <= rank < world_size = {world_size}")
    if max_seq_len < 1:
        _fail("max_seq_len", max_seq_len, ">= 1")
    if max_query_len < 1:
        _fail("max_query_len", max_query_len, ">= 1")
    T, H, _ = idx_q.shape
    B = seq_lens.shape[0]
    if H < 1:
        _fail("idx_q", f"heads = {H}", "heads >= 1")
    if T != B * max_query_len:
        _fail("idx_q", f"tokens = {T}", f"batch * max_query_len = {B} * {max_query_len} = {B * max_query_len}")
    if block_table.shape[0] != B:
        _fail("block_table", f"rows = {block_table.shape[0]}", f"rows == batch = {B}")
    G = -(-max_seq_len // 128)
    if "table_width" not in skip and block_table.shape[1] < G:
        _fail("block_table", f"width = {block_table.shape[1]}", f"width >= ceil(max_seq_len / 128) = {G}")
