"""ctxscore fixtures (fixtures/FORMAT.md, versions 1 and 2) with numpy alone,
and the case's buffers laid out as the fixture describes them."""
import json
import math
import os
import re
import stat
import struct

import numpy as np

from . import safetensors, selection
from .wire_format import FIXTURE_FORMAT_VERSION, OLDEST_FIXTURE_FORMAT_VERSION


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
        self.name = meta["case_class"]
        self.toolchain = meta.get("toolchain", "")  # a failure fixture's: what ran the implementation that failed

    @property
    def has_selection(self):
        return self.version >= 2

    def selection_params(self):
        m = self.meta
        return dict(k=int(m["selection_k"]), init_blocks=int(m["selection_init_blocks"]),
                    local_keep=int(m["selection_local_keep"]), init_score=f32_of_bits(m["selection_init_score_bits"]),
                    local_score=f32_of_bits(m["selection_local_score_bits"]))


MAX_LAYOUT_ELEMS = 1 << 26  # the most elements a fixture's buffers may describe (FORMAT.md)
MAX_TENSOR_ELEMS = 8 * MAX_LAYOUT_ELEMS  # the most any fixture tensor holds (the cache's 2^26 * 8), judged from the header
MAX_DATA_BYTES = 1 << 32  # every tensor at its limit together stays under this: a larger file is refused from its size
LOG2E_LITERAL = 1.4426950409
# FORMAT.md's number grammars (ASCII only; no '+', '_', spaces or leading zeros).
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
_REAL = re.compile(r"-?(nan|inf|([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?)")
_BITS = re.compile(r"0x[0-9a-fA-F]{8}")


def _read_bytes(path):
    """The file's bytes, header first: a non-regular file, or one whose size
    contradicts its header, is refused before its body is read."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise FixtureError(path, "file", f"cannot stat: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise FixtureError(path, "file", f"{kind}, expected a regular .safetensors file")
    size = st.st_size
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if size >= 8:
                (n,) = struct.unpack("<Q", head)
                try:
                    safetensors.check_header_length(n, size, path)
                except safetensors.FormatError as e:
                    raise FixtureError(path, e.field, e.problem)
                if size - 8 - n > MAX_DATA_BYTES:
                    raise FixtureError(path, "file size", f"{size} bytes: {size - 8 - n} bytes of tensor data, more than the "
                                                          f"{MAX_DATA_BYTES} any fixture holds")
                header = f.read(n)
                declared = _declared_data_bytes(header)
                if declared is not None and declared != size - 8 - n:
                    raise FixtureError(path, "file size", f"{size} bytes, while its header declares {8 + n + declared}")
                try:
                    layout, meta = safetensors.read_header(header, size - 8 - n, path)
                except safetensors.FormatError as e:
                    raise FixtureError(path, e.field, e.problem)
                _check_tensor_list(path, {name: (safetensors.NAMES[dtype.str], len(shape))
                                          for name, (dtype, shape, _, _) in layout.items()}, meta)
                for name, (_, shape, _, _) in layout.items():
                    if math.prod(shape) > MAX_TENSOR_ELEMS:
                        raise FixtureError(path, name + ".shape", f"{shape} holds {math.prod(shape)} elements, more than "
                                                                  f"the {MAX_TENSOR_ELEMS} any fixture tensor may hold")
                f.seek(0)
            return f.read()
    except OSError as e:
        raise FixtureError(path, "file", f"cannot read: {e.strerror}")
    except MemoryError:
        raise FixtureError(path, "file", f"its {size} bytes do not fit in this process's memory")


def _declared_data_bytes(header):
    try:
        j = json.loads(header)
    except (ValueError, RecursionError):
        return None
    if not isinstance(j, dict):
        return None
    end = 0
    for name, entry in j.items():
        if name == "__metadata__":
            continue
        off = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not isinstance(off, list) or len(off) != 2 or type(off[1]) is not int or off[1] < 0:
            return None
        end = max(end, off[1])
    return end


class _Meta:
    """The metadata's fields, parsed as the C++ reader parses them."""

    def __init__(self, path, meta):
        self.path, self.m = path, meta

    def fail(self, key, problem):
        raise FixtureError(self.path, "__metadata__." + key, problem)

    def text(self, key):
        if key not in self.m:
            self.fail(key, "missing")
        return self.m[key]

    def integer(self, key, lo, hi):
        s = self.text(key)
        if not _DECIMAL.fullmatch(s):
            self.fail(key, f"{s!r} is not a decimal integer")
        v = int(s)
        if not lo <= v <= hi:
            self.fail(key, f"{s}, expected {lo} <= value <= {hi}")
        return v

    def real(self, key):
        s = self.text(key)
        if not _REAL.fullmatch(s):
            self.fail(key, f"{s!r} is not a number")
        return float(s)

    def bits(self, key):
        s = self.text(key)
        if not _BITS.fullmatch(s):
            self.fail(key, f"{s!r}, expected fp32 bits as 0x followed by 8 hex digits")
        return int(s, 16)


def _f32(x):
    with np.errstate(over="ignore"):
        return np.float32(x)


def _bits(x):
    return int(np.array([x], np.float32).view(np.uint32)[0])


SUM_ERR = 128.0 / 8388608.0  # CONTRACT.md section 5: 128 terms, fp32's 2^-23
TOLERANCE_ALLOWANCE = 1.0 / 1048576.0  # FORMAT.md: a stored tolerance's relative allowance over the recomputed one


def scan_slots(length, G, L, rank, world):
    """CONTRACT.md section 4: the local slots a request of `length` tokens writes on this rank."""
    reach = min(-(-length // 128), G)
    return max(min(L, -(-max(reach - rank, 0) // world)), 0)


def tolerance_caps(q_bits, cache_bits, table, lens, QL, rank, world, G, L, scale):
    """Two [H, T, L] float64 arrays, recomputed from the inputs: the largest
    tolerance FORMAT.md allows each written element (the contract's bound
    widened by the rounding of the exact score to fp32, times 1 + the
    allowance; 0 elsewhere), and the exact scores (-inf where no position
    qualifies, NaN where nothing is written)."""
    q = widen_bf16(q_bits).astype(np.float64)  # [T, H, 128]
    T, H, _ = q.shape
    P = cache_bits.shape[0]
    caps = np.zeros((H, T, L))
    exacts = np.full((H, T, L), np.nan)
    scale64 = float(np.float32(scale))
    for i, length in enumerate(int(x) for x in lens):
        rows = q[i * QL:(i + 1) * QL]  # [QL, H, 128]
        for j in range(scan_slots(length, G, L, rank, world)):
            b = j * world + rank
            # Positions past the request's reach may hold anything (poison): never widened.
            reach = min(max(length - b * 128, 0), 128)
            page = widen_bf16(cache_bits[min(max(int(table[i, b]), 0), P - 1)][:reach]).astype(np.float64)  # [pos, 128]
            dots = rows @ page.T  # [QL, H, pos]
            mags = np.abs(rows) @ np.abs(page).T
            for t in range(QL):
                n = min(max(length - QL + t + 1 - b * 128, 0), 128)
                if n == 0:
                    exacts[:, i * QL + t, j] = -np.inf  # judged bitwise, no tolerance
                    continue
                exact = (scale64 * dots[t, :, :n]).max(axis=1)
                exacts[:, i * QL + t, j] = exact
                stored = exact.astype(np.float32)
                ulp = np.spacing(np.abs(stored)).astype(np.float64)
                bound = abs(scale64) * SUM_ERR * mags[t, :, :n].max(axis=1) + ulp
                caps[:, i * QL + t, j] = (bound + np.abs(exact - stored.astype(np.float64))) * (1 + TOLERANCE_ALLOWANCE)
    return caps, exacts


def outside_the_model(q_bits, cache_bits, table, lens, QL, rank, world, G, L):
    """(field, why) for the first non-finite value a written element reads
    (CONTRACT.md section 5: outside the numeric model, so no fixture holds
    it), else None: the query rows of a request that scans a slot, and the
    positions of each page it scans within the request's reach."""
    P = cache_bits.shape[0]
    for i, length in enumerate(int(x) for x in lens):
        scan = scan_slots(length, G, L, rank, world)
        if scan == 0:
            continue  # its rows read nothing: they may hold anything
        rows = widen_bf16(q_bits[i * QL:(i + 1) * QL])
        if not np.isfinite(rows).all():
            t, h = np.argwhere(~np.isfinite(rows).all(axis=2))[0]
            return "idx_q", f"holds a non-finite value at token {i * QL + t} head {h}"
        for j in range(scan):
            b = j * world + rank
            p = min(max(int(table[i, b]), 0), P - 1)
            reach = min(max(length - b * 128, 0), 128)
            if not np.isfinite(widen_bf16(cache_bits[p][:reach])).all():
                return "index_cache", f"page {p} (request {i}, slot {j}) holds a non-finite value"
    return None


def written_set(lens, QL, G, L, rank, world):
    """[T, L] of 0/1: the slots CONTRACT.md section 4 writes."""
    w = np.zeros((len(lens) * QL, L), np.uint8)
    for i, length in enumerate(int(x) for x in lens):
        w[i * QL:(i + 1) * QL, :scan_slots(length, G, L, rank, world)] = 1
    return w


def read(path):
    """The fixture at `path`, validated by every rule of FORMAT.md before
    anything is laid out; FixtureError (file, field, value, rule) otherwise."""
    raw = _read_bytes(path)
    try:
        tensors, meta = safetensors.decode(raw, path)
    except safetensors.FormatError as e:
        raise FixtureError(path, e.field, e.problem)
    return _validate(path, tensors, meta)


# Each tensor's dtype and rank (BASE from format 1, SELECTION from format 2).
KINDS = {"idx_q": ("BF16", 3), "index_cache": ("BF16", 3), "block_table": ("I32", 2), "seq_lens": ("I32", 1),
         "expected": ("F32", 3), "written": ("U8", 2), "tolerance": ("F32", 3), "selection_higher": ("I32", 3),
         "selection_lower": ("I32", 3), "selection_margin": ("F32", 2)}


def _check_tensor_list(path, kinds, meta):
    """The format, its version and the tensor list ({name: (dtype name,
    rank)}), as a header declares them: a file of the wrong tensors is
    refused before any of them is read. Returns the format version."""
    m = _Meta(path, meta)
    if m.text("format") != "ctxscore-fixture":
        m.fail("format", f"{meta['format']!r}, expected 'ctxscore-fixture'")
    version = m.integer("format_version", OLDEST_FIXTURE_FORMAT_VERSION, FIXTURE_FORMAT_VERSION)
    wanted = BASE + (SELECTION if version >= 2 else ())
    for name, (dtype, rank) in kinds.items():
        if name not in wanted:
            raise FixtureError(path, name, f"unexpected tensor in format version {version}")
        if (dtype, rank) != KINDS[name]:
            raise FixtureError(path, name, f"{dtype} of rank {rank}, expected {KINDS[name][0]} of rank {KINDS[name][1]}")
    for name in wanted:
        if name not in kinds:
            raise FixtureError(path, name, "missing tensor")
    return version


def _validate(path, t, meta):
    m = _Meta(path, meta)
    version = _check_tensor_list(path, {name: (safetensors.NAMES[a.dtype.str], a.ndim) for name, a in t.items()}, meta)
    m.text("case_class")
    m.integer("seed", 0, (1 << 64) - 1)
    world = m.integer("world", 1, 1 << 20)
    rank = m.integer("rank", 0, world - 1)
    S = m.integer("max_seq_len", 1, 1 << 40)
    QL = m.integer("max_query_len", 1, 1 << 20)
    sm_scale = m.real("sm_scale")
    if not math.isfinite(sm_scale):
        m.fail("sm_scale", f"{meta['sm_scale']}, expected a finite number")
    scale = _f32(sm_scale * LOG2E_LITERAL)
    if m.bits("scale_bits") != _bits(scale):
        m.fail("scale_bits", f"{meta['scale_bits']} contradicts sm_scale {meta['sm_scale']}")
    if _f32(m.real("scale")) != scale:
        m.fail("scale", f"{meta['scale']} contradicts scale_bits {meta['scale_bits']}")
    sentinel = np.array([m.bits("sentinel_bits")], np.uint32).view(np.float32)[0]
    stated = _f32(m.real("sentinel"))
    if not (stated == sentinel or (np.isnan(stated) and np.isnan(sentinel))):
        m.fail("sentinel", f"{meta['sentinel']} contradicts sentinel_bits {meta['sentinel_bits']}")
    q, cache, table, lens = t["idx_q"], t["index_cache"], t["block_table"], t["seq_lens"]
    if q.shape[2] != 128:
        raise FixtureError(path, "idx_q", f"shape {list(q.shape)}, expected [T, H, 128]")
    if cache.shape[0] < 1 or cache.shape[1:] != (128, 128):
        raise FixtureError(path, "index_cache", f"shape {list(cache.shape)}, expected [P >= 1, 128, 128]")
    T, H = q.shape[0], q.shape[1]
    B = lens.shape[0]
    if H < 1:
        raise FixtureError(path, "idx_q", f"shape {list(q.shape)}, expected at least one head")
    if T != B * QL:
        raise FixtureError(path, "idx_q", f"shape {list(q.shape)} has T = {T} tokens, but seq_lens has B = {B} "
                                          f"requests of max_query_len {QL} (T must be B*QL)")
    G = -(-S // 128)
    L = -(-G // world)
    if m.integer("global_blocks", 0, (1 << 63) - 1) != G:
        m.fail("global_blocks", f"{meta['global_blocks']} contradicts max_seq_len {S}: ceil(S/128) = {G}")
    if m.integer("local_slots", 0, (1 << 63) - 1) != L:
        m.fail("local_slots", f"{meta['local_slots']} contradicts global_blocks and world: ceil(G/world) = {L}")
    if table.shape[0] != B:
        raise FixtureError(path, "block_table", f"shape {list(table.shape)} has {table.shape[0]} rows, seq_lens has {B}")
    for name, want in (("expected", (H, T, L)), ("written", (T, L)), ("tolerance", (H, T, L))):
        if t[name].shape != want:
            raise FixtureError(path, name, f"shape {list(t[name].shape)}, expected {list(want)}")
    if H * T * L > MAX_LAYOUT_ELEMS or cache.shape[0] * 16384 > MAX_TENSOR_ELEMS:
        raise FixtureError(path, "expected", f"this fixture is larger than the {MAX_LAYOUT_ELEMS} elements a fixture may describe")
    width = table.shape[1]
    table_row_stride = m.integer("table_row_stride", width, width + MAX_LAYOUT_ELEMS)
    q_head_stride = m.integer("q_head_stride", 128, MAX_LAYOUT_ELEMS)
    q_token_stride = m.integer("q_token_stride", 128, MAX_LAYOUT_ELEMS)
    # Tokens or heads outermost: either way, a stride steps past all that
    # the dimensions inside it span (128 elements of D, at the least).
    q_span = 128
    for stride, extent in sorted(((q_head_stride, H), (q_token_stride, T))):
        if extent > 1 and stride < q_span:
            m.fail("q_*_stride", f"token stride {q_token_stride} and head stride {q_head_stride} make distinct query rows "
                   "overlap (expected each stride past what the dimensions inside it span)")
        if extent > 1:
            q_span += stride * (extent - 1)
    if q_span > MAX_LAYOUT_ELEMS:
        m.fail("q_token_stride", f"the query buffer it asks for exceeds {MAX_LAYOUT_ELEMS} elements")
    if B * table_row_stride > MAX_LAYOUT_ELEMS:
        m.fail("table_row_stride", f"the table buffer it asks for exceeds {MAX_LAYOUT_ELEMS} elements")
    out_rows = m.integer("out_rows", T, T + MAX_LAYOUT_ELEMS)
    out_slots = m.integer("out_slots", L, L + MAX_LAYOUT_ELEMS)
    strides = [m.integer(k, 1, MAX_LAYOUT_ELEMS) for k in ("out_head_stride", "out_row_stride", "out_slot_stride")]
    span = 1
    for stride, extent in sorted(zip(strides, (H, out_rows, out_slots))):
        if extent > 1 and stride < span:
            m.fail("out_*_stride", f"strides {tuple(strides)} make distinct elements of out alias")
        if extent > 1:
            span = stride * (extent - 1) + span
        if span > MAX_LAYOUT_ELEMS:
            m.fail("out_*_stride", f"the out buffer they ask for exceeds {MAX_LAYOUT_ELEMS} elements")
    has_chunk, has_grid = "geometry_chunk" in meta, "geometry_grid_y" in meta
    if has_chunk != has_grid:
        m.fail("geometry_grid_y" if has_chunk else "geometry_chunk", "missing: a forced geometry needs both")
    for key in ("geometry_teams", "geometry_ring_pages"):
        if key in meta and not has_chunk:
            m.fail(key, "given without geometry_chunk and geometry_grid_y")
    if has_chunk:
        m.integer("geometry_chunk", 1, 1 << 30), m.integer("geometry_grid_y", 1, 1 << 30)
        for key in ("geometry_teams", "geometry_ring_pages"):
            if key in meta:
                m.integer(key, 1, 64)
    written = t["written"]
    if (written > 1).any():
        raise FixtureError(path, "written", f"element {int(np.argmax(written > 1))} is {int(written.max())}, expected 0 or 1")
    want = written_set(lens, QL, G, L, rank, world)
    if not np.array_equal(written, want):
        r, j = np.argwhere(written != want)[0]
        raise FixtureError(path, "written", f"element [{r}, {j}] is {written[r, j]} but the contract "
                                            f"{'writes' if want[r, j] else 'does not write'} that slot for these seq_lens")
    w = np.broadcast_to(written.astype(bool), (H, T, L))
    exp, tol = t["expected"], t["tolerance"]
    sentinel_bits = _bits(sentinel)
    if (~w & (exp.view(np.uint32) != sentinel_bits)).any():
        raise FixtureError(path, "expected", "an unwritten slot does not hold the sentinel's bits")
    if (w & (np.isnan(exp) | np.isposinf(exp))).any():
        raise FixtureError(path, "expected", "a written slot holds NaN or +inf, expected a finite score or -inf")
    if not (np.isfinite(tol) & (tol >= 0)).all():
        raise FixtureError(path, "tolerance", "a tolerance is negative, NaN or infinite, expected finite and >= 0")
    if (~w & (tol != 0)).any():
        raise FixtureError(path, "tolerance", "an unwritten slot has a non-zero tolerance, expected 0")
    if problem := outside_the_model(q, cache, table, lens, QL, rank, world, G, L):
        raise FixtureError(path, problem[0], problem[1] + ": outside the contract's numeric model (CONTRACT.md section 5), "
                                             "which no fixture may leave")
    caps, exacts = tolerance_caps(q, cache, table, lens, QL, rank, world, G, L, scale)
    loose = w & np.isfinite(exp) & (tol.astype(np.float64) > caps)
    if loose.any():
        h, r, j = np.argwhere(loose)[0]
        raise FixtureError(path, "tolerance", f"{tol[h, r, j]!r} at [{h}, {r}, {j}] exceeds the contract's bound recomputed "
                                              f"from the inputs ({caps[h, r, j]:.9g} with the allowance of 2^-20)")
    # The fixture's claims: it judges others by them, so they must hold.
    with np.errstate(invalid="ignore"):
        off = w & np.where(np.isneginf(exacts), ~np.isneginf(exp),
                           ~(np.abs(exp.astype(np.float64) - exacts) <= tol.astype(np.float64)))
    if off.any():
        h, r, j = np.argwhere(off)[0]
        e = (h * T + r) * L + j
        said = " (no position qualifies)" if np.isneginf(exacts[h, r, j]) else f" within the fixture's tolerance {tol[h, r, j]:.9g}"
        raise FixtureError(path, "expected", f"{exp[h, r, j]:.9g} at flat index {e}, but the inputs give "
                                             f"{exacts[h, r, j]:.17g}{said}")
    if version >= 2:
        k = m.integer("selection_k", 1, 4096)
        m.integer("selection_init_blocks", 0, 0xFFFF), m.integer("selection_local_keep", 0, 0xFFFF)
        m.bits("selection_init_score_bits"), m.bits("selection_local_score_bits")
        if G >= 0xFFFF:
            m.fail("max_seq_len", f"{S} gives G = {G}, but a selection key holds G < 65535")
        for name, want_shape in (("selection_higher", (H, T, k)), ("selection_lower", (H, T, k)), ("selection_margin", (H, T))):
            if t[name].shape != want_shape:
                raise FixtureError(path, name, f"shape {list(t[name].shape)}, expected {list(want_shape)}")
        # The stored selections must be what §9 selects from `expected`.
        params = Fixture(path, t, meta).selection_params()
        dense = np.where(w, exp, np.float32(np.nan))
        for name, tie in (("selection_higher", selection.HIGHER), ("selection_lower", selection.LOWER)):
            want = selection.local_selection(dense, lens, QL, rank, world, G, params, tie)
            if not np.array_equal(t[name], want):
                e = int(np.flatnonzero(t[name] != want)[0])
                raise FixtureError(path, name, f"element {e} is block {t[name].flat[e]}, but the top-{k} of `expected` "
                                               f"there is block {want.flat[e]}")
        want = selection.margins(exp, tol, lens, QL, rank, world, G, params)
        stored = t["selection_margin"]
        off = (stored.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(stored) & np.isnan(want))
        if off.any():
            e = int(np.flatnonzero(off)[0])
            raise FixtureError(path, "selection_margin", f"element {e} is {stored.flat[e]:.9g}, but `expected` and "
                                                         f"`tolerance` give {want.flat[e]:.9g}")
    return Fixture(path, t, meta)


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
