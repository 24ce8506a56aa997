"""The safetensors container with numpy alone: an 8-byte little-endian
header length, a JSON header, then the tensor bytes. Used for fixtures and
for the port protocol's messages."""
import json
import math
import struct

import numpy as np

DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
NAMES = {np.dtype(v).str: k for k, v in DTYPES.items()}


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


def decode(raw, source):
    """(tensors: {name: ndarray}, metadata: {str: str}) from container bytes."""
    if len(raw) < 8:
        raise FormatError(source, "header length", f"truncated: {len(raw)} bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    check_header_length(n, len(raw), source)
    if b"\0" in bytes(raw[8:8 + n]):
        raise FormatError(source, "header", "a NUL byte: a header is JSON, padded with spaces")
    try:
        header = json.loads(bytes(raw[8:8 + n]))
    except (ValueError, RecursionError) as e:
        raise FormatError(source, "header", f"not valid JSON: {type(e).__name__}: {e}")
    if not isinstance(header, dict):
        raise FormatError(source, "header", "expected a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(source, "__metadata__", "expected an object of strings")
    data = memoryview(raw)[8 + n:]
    tensors, end = {}, 0
    for name, entry in header.items():
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
            raise FormatError(source, name, f"missing or unknown dtype in {entry!r}")
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < (1 << 63) for d in shape):
            raise FormatError(source, name + ".shape", f"{shape!r}, expected non-negative integers")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            raise FormatError(source, name + ".data_offsets", f"{offsets!r}, expected [begin, end]")
        dtype = np.dtype(DTYPES[entry["dtype"]])
        begin, stop = offsets
        if not 0 <= begin <= stop <= len(data) or stop - begin != math.prod(shape) * dtype.itemsize:
            raise FormatError(source, name + ".data_offsets", f"{offsets} do not hold {entry['dtype']} {shape}")
        tensors[name] = np.frombuffer(data[begin:stop], dtype=dtype).reshape(shape)
        end = max(end, stop)
    if end != len(data):
        raise FormatError(source, "data", f"{len(data) - end} bytes at the end belong to no tensor")
    return tensors, dict(meta)


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
