"""The safetensors container with numpy alone: an 8-byte little-endian
header length, a JSON header, then the tensor bytes. Used for fixtures and
for the port protocol's messages."""
import json
import math
import struct

import numpy as np

DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
NAMES = {np.dtype(v).str: k for k, v in DTYPES.items()}
ENTRY_KEYS = ("dtype", "shape", "data_offsets")


class FormatError(Exception):
    """Bytes that are not a valid container (or message); names the part and the problem."""

    def __init__(self, source, field, problem):
        super().__init__(f"{source}: {field}: {problem}")
        self.source, self.field, self.problem = source, field, problem


MAX_HEADER_BYTES = 1 << 24  # the largest JSON header a reader accepts (as the C++ reader)


def check_header_length(n, size, source):
    """Raises FormatError when a document of `size` bytes announces a header
    of `n` bytes that is empty, over the limit, or runs past its end."""
    if n == 0:
        raise FormatError(source, "header length", "0, expected a JSON header of at least 2 bytes")
    if n > MAX_HEADER_BYTES:
        raise FormatError(source, "header length", f"{n} bytes, more than the {MAX_HEADER_BYTES} a fixture header may have")
    if n > size - 8:
        raise FormatError(source, "header length", f"{n} bytes past the end: the file has {size - 8} bytes after the length field")


def read_header(header_bytes, data_size, source):
    """The container's layout from its header alone, every container rule
    checked against `data_size` bytes of data: ({name: (dtype, shape, begin,
    end)}, metadata {str: str}). Nothing of the data is needed."""
    if b"\0" in header_bytes:
        raise FormatError(source, "header", "a NUL byte: a header is JSON, padded with spaces")
    header = parse_header(header_bytes, source)
    if not isinstance(header, dict):
        raise FormatError(source, "header", "expected a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(source, "__metadata__", "expected an object of strings")
    layout = {}
    for name, entry in header.items():
        if not isinstance(entry, dict):
            raise FormatError(source, name, f"a JSON {type(entry).__name__}, expected {{dtype, shape, data_offsets}}")
        for key in entry:
            if key not in ENTRY_KEYS:
                raise FormatError(source, f"{name}.{key}", "unknown key, expected only dtype, shape, data_offsets")
        for key in ENTRY_KEYS:
            if key not in entry:
                raise FormatError(source, f"{name}.{key}", "missing")
        if entry["dtype"] not in DTYPES:
            raise FormatError(source, name + ".dtype", f"unknown dtype {entry['dtype']!r}, expected one of {', '.join(DTYPES)}")
        shape, offsets = entry["shape"], entry["data_offsets"]
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < (1 << 63) for d in shape):
            raise FormatError(source, name + ".shape", f"{shape!r}, expected non-negative integers")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            raise FormatError(source, name + ".data_offsets", f"{offsets!r}, expected [begin, end]")
        dtype = np.dtype(DTYPES[entry["dtype"]])
        begin, stop = offsets
        if not 0 <= begin <= stop <= data_size or stop - begin != math.prod(shape) * dtype.itemsize:
            raise FormatError(source, name + ".data_offsets", f"{offsets} do not hold {entry['dtype']} {shape}")
        layout[name] = (dtype, shape, begin, stop)
    # The tensors must tile the data exactly: no overlap, no unclaimed bytes.
    covered = 0
    for begin, stop, name in sorted((b, e, n) for n, (_, _, b, e) in layout.items()):
        if begin < covered:
            raise FormatError(source, name + ".data_offsets", f"[{begin}, {stop}) overlaps another tensor's bytes (which end at {covered})")
        if begin > covered:
            raise FormatError(source, name + ".data_offsets", f"bytes [{covered}, {begin}) before it belong to no tensor")
        covered = stop
    if covered != data_size:
        raise FormatError(source, "data", f"bytes [{covered}, {data_size}) at the end belong to no tensor")
    return layout, dict(meta)


def decode(raw, source):
    """(tensors: {name: ndarray}, metadata: {str: str}) from container bytes."""
    if len(raw) < 8:
        raise FormatError(source, "header length", f"truncated: {len(raw)} bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    check_header_length(n, len(raw), source)
    layout, meta = read_header(bytes(raw[8:8 + n]), len(raw) - 8 - n, source)
    data = memoryview(raw)[8 + n:]
    tensors = {name: np.frombuffer(data[begin:stop], dtype=dtype).reshape(shape)
               for name, (dtype, shape, begin, stop) in layout.items()}
    return tensors, meta


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _strict_pairs(pairs):
    for key, value in pairs:
        for text in (key, value) if isinstance(value, str) else (key,):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"the string {text!r} holds a lone surrogate escape, which is no Unicode text")
    return dict(pairs)


def parse_header(text, source):
    """A header's JSON as strict JSON parsers read it: NaN and Infinity are not
    JSON, and a string holding a lone surrogate escape is no text."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_strict_pairs)
    except (ValueError, RecursionError) as e:
        raise FormatError(source, "header", f"not valid JSON: {type(e).__name__}: {e}")


def encode(tensors, metadata):
    """Container bytes for {name: ndarray} (BF16 as uint16 bits) and string metadata."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        a = np.ascontiguousarray(array)
        dtype = NAMES.get(a.dtype.str)  # uint16 arrays are BF16 bits
        if dtype is None:
            raise TypeError(f"{name}: dtype {a.dtype} has no safetensors name here (BF16, F16, F32, I32, I64, U8)")
        blob = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)
