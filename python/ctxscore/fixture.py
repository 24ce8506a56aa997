"""ctxscore fixtures (fixtures/FORMAT.md, versions 1 and 2) with numpy alone,
and the case's buffers laid out as the fixture describes them."""
import numpy as np

from . import safetensors

BASE = ("idx_q", "index_cache", "block_table", "seq_lens", "expected", "written", "tolerance")
SELECTION = ("selection_higher", "selection_lower", "selection_margin")


class FixtureError(safetensors.FormatError):
    """A malformed fixture: the file, the field and the problem."""


def widen_bf16(bits):
    """bf16 bits (uint16) to float32, exactly."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_of_bits(text):
    return np.array([int(text, 16)], np.uint32).view(np.float32)[0]


class Fixture:
    """One case: its tensors (dense), its metadata, and its layout."""

    def __init__(self, path, tensors, meta):
        self.path, self.t, self.meta = path, tensors, meta
        self.version = int(meta["format_version"])
        self.T, self.H, _ = tensors["idx_q"].shape
        self.B = tensors["seq_lens"].shape[0]
        self.L = tensors["written"].shape[1]
        self.P = tensors["index_cache"].shape[0]
        self.QL = int(meta["max_query_len"])
        self.S = int(meta["max_seq_len"])
        self.rank, self.world = int(meta["rank"]), int(meta["world"])
        self.G = int(meta["global_blocks"])
        self.sm_scale = float(meta["sm_scale"])
        self.sentinel = f32_of_bits(meta["sentinel_bits"])
        self.q_strides = (int(meta["q_token_stride"]), int(meta["q_head_stride"]), 1)
        self.table_row_stride = int(meta["table_row_stride"])
        self.out_shape = (self.H, int(meta["out_rows"]), int(meta["out_slots"]))
        self.out_strides = (int(meta["out_head_stride"]), int(meta["out_row_stride"]), int(meta["out_slot_stride"]))
        self.name = meta.get("case_class", path)

    @property
    def has_selection(self):
        return self.version >= 2

    def selection_params(self):
        m = self.meta
        return dict(k=int(m["selection_k"]), init_blocks=int(m["selection_init_blocks"]),
                    local_keep=int(m["selection_local_keep"]), init_score=f32_of_bits(m["selection_init_score_bits"]),
                    local_score=f32_of_bits(m["selection_local_score_bits"]))


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        tensors, meta = safetensors.decode(raw, path)
    except safetensors.FormatError as e:
        raise FixtureError(path, e.field, e.problem)
    if meta.get("format") != "ctxscore-fixture" or meta.get("format_version") not in ("1", "2"):
        raise FixtureError(path, "__metadata__", "not a ctxscore fixture of format version 1 or 2")
    wanted = BASE + (SELECTION if meta["format_version"] == "2" else ())
    for name in wanted:
        if name not in tensors:
            raise FixtureError(path, name, "missing tensor")
    for name in tensors:
        if name not in wanted:
            raise FixtureError(path, name, f"unexpected tensor in format version {meta['format_version']}")
    for key in ("max_query_len", "max_seq_len", "rank", "world", "global_blocks", "sm_scale", "sentinel_bits",
                "q_token_stride", "q_head_stride", "table_row_stride", "out_rows", "out_slots", "out_head_stride",
                "out_row_stride", "out_slot_stride"):
        if key not in meta:
            raise FixtureError(path, "__metadata__." + key, "missing")
    try:
        f = Fixture(path, tensors, meta)
    except (ValueError, KeyError) as e:
        raise FixtureError(path, "__metadata__", f"does not parse: {e}")
    if f.T != f.B * f.QL or tensors["expected"].shape != (f.H, f.T, f.L):
        raise FixtureError(path, "expected", f"shape {list(tensors['expected'].shape)}, expected [{f.H}, {f.T}, {f.L}]")
    return f


def files_under(paths):
    """The .safetensors files of paths (files or directories), sorted per directory."""
    import os

    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".safetensors"))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: does not exist")
    return out


def strided(dense, strides, fill):
    """(storage, view): a fresh 1-D storage holding `fill`, and a view with the
    given element strides over it holding `dense`."""
    extent = 1 + sum((d - 1) * s for d, s in zip(dense.shape, strides)) if dense.size else 1
    storage = np.full(extent, fill, dtype=dense.dtype)
    view = np.lib.stride_tricks.as_strided(storage, dense.shape, [s * storage.itemsize for s in strides])
    view[...] = dense
    return storage, view
