"""Serve a Python implementation to the ctxscore harness as a port
(fixtures/PROTOCOL.md):

    python3 -m ctxscore.port module:function [--geometry module:function]
                             [--device cuda|cpu] [--tensors torch|numpy] [--name NAME]

`function` has upstream's exact positional signature,

    function(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank,
             world_size, max_query_len, sm_scale, out=None)

and receives torch tensors (bf16, int32, fp32) on --device, each a strided
view into its own storage as the harness laid it out (or numpy float32 with
--tensors numpy). With `out` it writes in place; without, or when `out` does
not fit, it returns fresh scores. On a CUDA or ROCm device the port also
records graphs (torch.cuda.CUDAGraph) for the harness's capture properties.
`--geometry` names a function (batch, max_seq_len, world_size, heads,
max_query_len) -> (chunk_count, chunk, grid_x, grid_y) for the harness to
fuzz the port's launch geometry.
"""
import argparse
import struct
import sys
import time
import traceback

import numpy as np

from . import safetensors
from .wire_format import (CALL_TENSORS, FRAME_LENGTH_BYTES, PORT_EXIT_DEVICE_UNAVAILABLE, PROTOCOL_VERSION, frame_length,
                          read_frame_length)
from .tensors import Buffers, to_numpy, torch_available


MAX_REQUEST_BYTES = 1 << 38  # far past any case's buffers, far below what eight bytes of text announce
ASK_MEMORY_ABOVE_BYTES = 1 << 26


def available_memory():
    """The bytes of memory this machine can still give (MemAvailable + SwapFree); None where it does not say."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return sum(int(fields[key].split()[0]) * 1024 for key in ("MemAvailable", "SwapFree"))
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _read_exactly(stream, view, what):
    got = 0
    while got < len(view):  # one read returns at most about 2 GiB
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError(f"the harness closed the pipe mid-message ({what}: {got} of {len(view)} bytes)")
        got += k


def read_frame(stream, limit=MAX_REQUEST_BYTES, tensors=None):
    """The next message's bytes, or None at the end of the stream. The
    document's header is read first: a frame that is not exactly the
    tensors its header declares, or (given `tensors`, as a request's
    CALL_TENSORS) that declares another tensor or one that is not 1-D, is
    refused before its body is allocated."""
    head = stream.read(FRAME_LENGTH_BYTES)
    if not head:
        return None
    if len(head) < FRAME_LENGTH_BYTES:
        raise EOFError("the harness closed the pipe mid-length")
    n = read_frame_length(head)
    if n > limit:
        raise EOFError(f"a message of {n} bytes announced, more than the {limit} one may have "
                       "(is stdin the port protocol?)")
    # /proc/meminfo costs more than a small frame's whole exchange: asked only of large ones.
    available = available_memory() if n > ASK_MEMORY_ABOVE_BYTES else None
    if available is not None and n > available:
        raise MemoryError(f"a message of {n} bytes announced, more than the {available} bytes of memory this machine "
                          "has available (MemAvailable + SwapFree)")
    source = "the harness's request" if tensors is not None else "the message"
    if n < 8:
        raise safetensors.FormatError(source, "header length", f"a message of {n} bytes, the length field alone needs 8")
    start = bytearray(8)
    _read_exactly(stream, memoryview(start), "its header length")
    (h,) = struct.unpack("<Q", start)
    safetensors.check_header_length(h, n, source)
    header = bytearray(h)
    _read_exactly(stream, memoryview(header), "its header")
    layout, _ = safetensors.read_header(bytes(header), n - 8 - h, source)
    for name, (_, shape, _, _) in layout.items() if tensors is not None else ():
        if name not in tensors:
            raise safetensors.FormatError(source, name, f"unexpected tensor, expected only the call's storages "
                                                        f"({', '.join(tensors)})")
        if len(shape) != 1:
            raise safetensors.FormatError(source, name, f"rank {len(shape)}, expected a 1-D storage")
    body = bytearray(n)
    body[:8 + h] = start + header
    _read_exactly(stream, memoryview(body)[8 + h:], "its tensors")
    return body


def write_frame(stream, data):
    stream.write(frame_length(len(data)))
    view = memoryview(data)
    while view:  # one write takes at most about 2 GiB of a larger message, and says how much
        view = view[stream.write(view):]
    stream.flush()


def ints(text):
    return tuple(int(x) for x in text.split(","))


def load(spec, what):
    import importlib
    import os

    if ":" not in spec:
        raise SystemExit(f"{what}: \"{spec}\", expected module:function")
    module, function = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as e:
        raise SystemExit(f"{what}: cannot load {spec}: {e}")


# A storage's dtype on the wire, by its numpy dtype (BF16 arrives as uint16 bits).
WIRE_DTYPES = {np.dtype(np.uint16): "bf16", np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
               np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


def wire_dtype(name, storage):
    if storage.dtype not in WIRE_DTYPES:
        raise ValueError(f"{name}: a storage of {storage.dtype}, expected one of BF16, F16, F32, I32, I64")
    return WIRE_DTYPES[storage.dtype]


def fits(name, storage, shape, strides):
    """A view must lie inside its storage: the harness sends one that does."""
    if len(shape) != len(strides) or any(n < 0 for n in shape) or any(s < 0 for s in strides):
        raise ValueError(f"{name}: shape {shape} with strides {strides}, expected as many non-negative of each")
    if 0 not in shape and sum((n - 1) * s for n, s in zip(shape, strides)) >= storage.size:
        raise ValueError(f"{name}: shape {shape} with strides {strides} reaches past its storage of {storage.size}")


class Call:
    """A request's buffers as views over fresh storages, and its arguments.
    Each view's dtype is its storage's; shapes and strides as the request
    says (a call that breaks the contract arrives as it is, for the function
    to refuse)."""

    NAMES = ("idx_q", "index_cache", "block_table", "seq_lens", "out")

    def __init__(self, buffers, t, m):
        self.m, self.buffers = m, buffers
        default_strides = {"index_cache": "16384,128,1", "seq_lens": "1"}
        self.views, self.bases, self.dtypes = {}, {}, {}
        for name in self.NAMES:
            if name not in t:
                if name == "out":
                    continue
                raise ValueError(f"a request without {name}")
            storage = t[name]
            shape = ints(m[f"{name}_shape"]) if f"{name}_shape" in m else tuple(storage.shape)
            strides = ints(m[f"{name}_strides"]) if f"{name}_strides" in m else ints(default_strides[name])
            fits(name, storage, shape, strides)
            self.dtypes[name] = wire_dtype(name, storage)
            self.views[name], self.bases[name] = buffers.view(storage, shape, strides, self.dtypes[name])
        self.q, self.q_base = self.views["idx_q"], self.bases["idx_q"]
        self.cache, self.cache_base = self.views["index_cache"], self.bases["index_cache"]
        self.table, self.table_base = self.views["block_table"], self.bases["block_table"]
        self.lens, self.lens_base = self.views["seq_lens"], self.bases["seq_lens"]
        self.out, self.out_base = self.views.get("out"), self.bases.get("out")
        self.args = (int(m["max_seq_len"]), int(m["rank"]), int(m["world_size"]), int(m["max_query_len"]),
                     float(m["sm_scale"]))

    def storages(self):
        """Every storage as the call left it, in its wire dtype."""
        self.buffers.synchronize()
        return {name: self.buffers.storage_bits(self.bases[name], self.dtypes[name]) for name in self.bases}

    def run(self, fn, max_seq_len=None):
        S, rank, world, ql, scale = self.args
        return fn(self.q, self.cache, self.table, self.lens, S if max_seq_len is None else max_seq_len, rank, world, ql,
                  scale, out=self.out)


def shares(a, b):
    """Whether a returned tensor lies in the storage of `b`."""
    if a is None or b is None:
        return False
    if hasattr(a, "data_ptr"):
        lo = b.data_ptr()
        return lo <= a.data_ptr() < lo + b.numel() * b.element_size()
    return np.shares_memory(a, b)


class Refused(Exception):
    """The function raised on a `score`: its exception, and every storage as it left them."""

    def __init__(self, raised, storages):
        super().__init__(str(raised))
        self.raised, self.storages = raised, storages


class Worker:
    def __init__(self, fn, geometry, buffers, name):
        self.fn, self.geometry_fn, self.buffers, self.name = fn, geometry, buffers, name
        self.captured = None
        self.copy_gb_per_s = None  # the machine's, measured by the first `time`

    def can_capture(self):
        return self.buffers.kind == "torch" and str(self.buffers.device).startswith("cuda")

    def hello(self, t, m):
        if m.get("protocol", str(PROTOCOL_VERSION)) != str(PROTOCOL_VERSION):
            raise ValueError(f"the harness speaks protocol {m['protocol']!r}, this worker protocol {PROTOCOL_VERSION}")
        supports = ["score", "time", "refuse"] + (["capture"] if self.can_capture() else []) + (["geometry"] if self.geometry_fn else [])
        return {}, {"message": "hello", "name": self.name, "supports": ",".join(supports),
                    "protocol": str(PROTOCOL_VERSION), "toolchain": self.toolchain(), "device": str(self.buffers.device)}

    def toolchain(self):
        """What runs the implementation: Python, numpy, and torch, Triton, the
        CUDA or ROCm version and the device where the implementation uses them."""
        import platform

        parts = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
        torch = sys.modules.get("torch")
        if torch is not None:
            parts.append(f"torch {torch.__version__}")
            if getattr(torch.version, "cuda", None):
                parts.append(f"cuda {torch.version.cuda}")
            if getattr(torch.version, "hip", None):
                parts.append(f"rocm {torch.version.hip}")
            if str(self.buffers.device).startswith("cuda") and torch.cuda.is_available():
                parts.append(torch.cuda.get_device_name(torch.device(self.buffers.device)))
        triton = sys.modules.get("triton")
        if triton is not None:
            parts.append(f"triton {triton.__version__}")
        return "; ".join(parts)

    def reply_scores(self, call, got):
        self.buffers.synchronize()
        tensors = {}
        if call.out_base is not None:
            tensors["out"] = self.buffers.storage_values(call.out_base).astype(np.float32)
        if not shares(got, call.out_base):
            if got is None:
                raise ValueError("the function returned None, expected the scores")
            tensors["fresh"] = to_numpy(got)
        return tensors, {"message": "scores"}

    def score(self, t, m):
        call = Call(self.buffers, t, m)
        started = time.perf_counter()
        try:
            got = call.run(self.fn)
            self.buffers.synchronize()
        except Exception as e:
            raise Refused(e, call.storages()) from e
        seconds = time.perf_counter() - started
        tensors, meta = self.reply_scores(call, got)
        meta["call_seconds"] = f"{seconds:.9f}"
        return tensors, meta

    def capture(self, t, m):
        if not self.can_capture():
            raise ValueError("this port records graphs only with torch tensors on a GPU (--device cuda)")
        torch = self.buffers.torch
        call = Call(self.buffers, t, m)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call.run(self.fn)  # warm-up outside the graph (compiles, allocates)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call.run(self.fn)
        torch.cuda.synchronize()
        self.captured = (call, graph)
        return {}, {"message": "captured"}

    def replay(self, t, m):
        if self.captured is None:
            raise ValueError("replay before any capture")
        call, graph = self.captured
        torch = self.buffers.torch
        # As a serving process does between capture and replay: tensors
        # allocated, filled with NaN and freed, and the cache emptied, so that a
        # graph keeping a pointer to memory its port freed reads poison.
        for n in (1 << 10, 1 << 18, 1 << 24):
            torch.full((n,), float("nan"), dtype=torch.float32, device=call.q_base.device)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # The storages arrive as numpy: copied into the captured ones.
        for name, base in (("idx_q", call.q_base), ("index_cache", call.cache_base), ("block_table", call.table_base),
                           ("seq_lens", call.lens_base), ("out", call.out_base)):
            if name not in t:
                raise ValueError(f"replay without {name}")
            values = t[name]
            src = (torch.from_numpy(np.ascontiguousarray(values).view(np.int16).copy()).view(torch.bfloat16)
                   if values.dtype == np.uint16 else torch.from_numpy(np.array(values, copy=True)))
            if src.numel() != base.numel():
                raise ValueError(f"replay's {name} storage has {src.numel()} elements, the captured one {base.numel()}")
            base.copy_(src.to(base.device))
        # Tensors that other work holds while the graph runs, in memory taken
        # afresh from the device (two 1 MiB ones fill one of torch's small
        # segments): a replay that writes through a pointer its port freed
        # after capture lands in one of them, or faults.
        torch.cuda.empty_cache()
        bystanders = [torch.full((n,), float("nan"), dtype=torch.float32, device=call.q_base.device)
                      for n in (1 << 18, 1 << 18, 1 << 22)]
        graph.replay()
        torch.cuda.synchronize()
        for b in bystanders:
            changed = int((~torch.isnan(b)).sum())
            if changed:
                raise ValueError(f"the replay wrote {changed} elements of a {b.numel() * 4}-byte tensor allocated after "
                                 f"capture, expected none: the graph writes through a pointer its port freed")
        return self.reply_scores(call, call.out)

    def time(self, t, m):
        """The median time of one call, and the copy rate (the machine's:
        measured by the first request). On a CUDA or ROCm device the timing
        every GPU backend shares (graph_timing.hpp): one graph of calls
        rotating over input sets that together exceed the L2 cache, replayed,
        events around each replay; elsewhere the wall clock around each call."""
        import statistics

        calls = int(m["calls"])
        if calls < 1:
            raise ValueError(f"calls = {calls}, expected >= 1")
        if not self.can_capture():
            call = Call(self.buffers, t, m)
            call.run(self.fn)  # warm-up
            us = []
            for _ in range(calls):
                t0 = time.perf_counter()
                call.run(self.fn)
                us.append((time.perf_counter() - t0) * 1e6)
            if self.copy_gb_per_s is None:
                a = np.ones(32 << 20)
                b = np.empty_like(a)
                copies = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    np.copyto(b, a)
                    copies.append(time.perf_counter() - t0)
                self.copy_gb_per_s = 2 * a.nbytes / statistics.median(copies) * 1e-9
            return {}, {"message": "timing", "median_us": repr(statistics.median(us)), "calls": str(calls),
                        "method": "host wall clock around each call", "copy_gb_per_s": repr(self.copy_gb_per_s)}
        torch = self.buffers.torch
        sets, total = [], 0
        while not sets or (total < (256 << 20) and 2 * total <= (8 << 30)):
            sets.append(Call(self.buffers, t, m))
            total += sum(x.numel() * x.element_size() for x in (sets[-1].q_base, sets[-1].cache_base, sets[-1].table_base,
                                                                 sets[-1].lens_base, sets[-1].out_base) if x is not None)
        per_graph = max(len(sets), 16)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for call in sets:
                call.run(self.fn)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for k in range(per_graph):
                sets[k % len(sets)].run(self.fn)
        for _ in range(3):
            graph.replay()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        replays = max(3, -(-calls // per_graph))
        us = []
        for _ in range(replays):
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            us.append(start.elapsed_time(stop) * 1e3 / per_graph)
        del graph
        if self.copy_gb_per_s is None:
            a = torch.zeros(1 << 30, dtype=torch.uint8, device=sets[0].q_base.device)
            b = torch.empty_like(a)
            copies = []
            for _ in range(5):
                start.record()
                b.copy_(a)
                stop.record()
                stop.synchronize()
                copies.append(start.elapsed_time(stop) * 1e-3)
            self.copy_gb_per_s = 2 * a.numel() / statistics.median(copies) * 1e-9
        return {}, {"message": "timing", "median_us": repr(statistics.median(us)), "calls": str(replays * per_graph),
                    "method": f"one graph of {per_graph} calls over {len(sets)} rotating input sets, "
                              f"device events around each of {replays} replays",
                    "copy_gb_per_s": repr(self.copy_gb_per_s)}

    def geometry(self, t, m):
        if not self.geometry_fn:
            raise ValueError("this port was started without --geometry")
        g = self.geometry_fn(int(m["batch"]), int(m["max_seq_len"]), int(m["world_size"]), int(m["heads"]),
                             int(m["max_query_len"]))
        chunk_count, chunk, grid_x, grid_y = (int(x) for x in g)
        return {}, {"message": "geometry", "chunk_count": chunk_count, "chunk": chunk, "grid_x": grid_x, "grid_y": grid_y}

    def serve(self, stdin, stdout):
        handlers = {"hello": self.hello, "score": self.score, "capture": self.capture, "replay": self.replay,
                    "geometry": self.geometry, "time": self.time}
        while True:
            frame = read_frame(stdin, tensors=CALL_TENSORS)
            if frame is None:
                return 0
            t, m = safetensors.decode(frame, "the harness's request")
            kind = m.get("message")
            if kind == "bye":
                write_frame(stdout, safetensors.encode({}, {"message": "bye"}))
                return 0
            try:
                if kind not in handlers:
                    raise ValueError(f"unknown request {kind!r}")
                tensors, meta = handlers[kind](t, m)
            except Exception as e:  # the implementation raised: the harness judges it, the port lives on
                tensors = {}
                if isinstance(e, Refused):  # the storages show whether it wrote before it raised
                    tensors, e = e.storages, e.raised
                # The innermost frame alone: a refusal's whole traceback costs more than the call.
                tail = "".join(traceback.format_exception(e, limit=-1)).strip().splitlines()[-3:]
                meta = {"message": "error", "reason": f"{type(e).__name__}: {e} ({' / '.join(tail)})"}
            write_frame(stdout, safetensors.encode(tensors, meta))


# The exit status before hello that says the device cannot be opened (EX_UNAVAILABLE).
DEVICE_UNAVAILABLE = PORT_EXIT_DEVICE_UNAVAILABLE


def device_problem(kind, device):
    """Why tensors of `kind` cannot live on `device` here; None when they can."""
    if device == "cpu":
        return None
    if kind != "torch":
        return f"numpy tensors live on the host; {device} needs --tensors torch"
    if not torch_available():
        return "torch is not importable"
    import torch

    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as e:
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else 'no message'}"
    return None


def torch_numpy_problem():
    """Why torch cannot exchange arrays with the numpy beside it (a torch built
    for numpy 1 beside numpy 2 says only "Numpy is not available"); None when it can."""
    import torch

    try:
        torch.from_numpy(np.zeros(1, np.float32))
    except RuntimeError as e:
        return (f"torch {torch.__version__} cannot exchange arrays with numpy {np.__version__} ({e}); install the "
                f"numpy this torch was built for (a torch built for numpy 1.x needs numpy<2)")
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ctxscore.port", description=__doc__.split("\n\n")[0])
    ap.add_argument("function", help="module:function with upstream's signature")
    ap.add_argument("--geometry", help="module:function giving the launch geometry the port uses")
    ap.add_argument("--tensors", choices=("numpy", "torch"), help="what the function receives (default: torch if importable)")
    ap.add_argument("--device", default="cpu", help="torch device: cpu or cuda (ROCm builds of torch call it cuda too)")
    ap.add_argument("--name", help="the name the harness reports (default: the function)")
    args = ap.parse_args(argv)
    fn = load(args.function, "function")
    geometry = load(args.geometry, "--geometry") if args.geometry else None
    kind = args.tensors or ("torch" if torch_available() else "numpy")
    if problem := device_problem(kind, args.device):
        # Before hello: the harness reports an error of the environment, not of the kernel (PROTOCOL.md).
        print(f"python3 -m ctxscore.port: cannot open device {args.device!r}: {problem}", file=sys.stderr)
        return DEVICE_UNAVAILABLE
    if kind == "torch" and (problem := torch_numpy_problem()):
        print(f"python3 -m ctxscore.port: {problem}", file=sys.stderr)
        return DEVICE_UNAVAILABLE
    buffers = Buffers(kind, args.device)
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # whatever the function prints must not reach the protocol
    try:
        return Worker(fn, geometry, buffers, args.name or args.function).serve(sys.stdin.buffer, protocol_out)
    except (EOFError, MemoryError, safetensors.FormatError) as e:  # not the protocol on stdin: one line, no traceback
        print(f"python3 -m ctxscore.port: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
