"""Malformed variants of a fixture, for holding the two readers (C++ and
Python) to one validity rule: odd number notations in every metadata field,
contradicting metadata, strides of every sign, truncations, flipped bytes,
wrong dtypes, shapes and offsets, a NUL-padded header, planted values in the
tensors. Each variant is (name, bytes); a few are valid on purpose."""
import json
import struct

import numpy as np

INTEGER_KEYS = ("world", "rank", "max_seq_len", "max_query_len", "q_head_stride", "q_token_stride", "table_row_stride",
                "out_rows", "out_slots", "out_head_stride", "out_row_stride", "out_slot_stride", "format_version",
                "global_blocks", "local_slots", "selection_k", "seed")
ODD_INTEGERS = ("", "+1", "01", "02", "1_0", "\u0660", " 1", "1.0", "-1", "-5", "-24", "0", "18446744073709551616",
                "nan", "true", "1e3", "100000000")
REAL_KEYS = ("sm_scale", "scale", "sentinel")
ODD_REALS = ("nan", "inf", "1e999", "0x1p-3", " 0.5", "+0.5", "1_0", "", "0.25", "-0")
BITS_KEYS = ("scale_bits", "sentinel_bits")
ODD_BITS = ("0x0", "0X3E0293EE", "3e0293ee", "0x3e0293ef", "0xc640e401")


def split(raw):
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(header, data, pad=b" "):
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += pad * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def with_meta(raw, key, value):
    header, data = split(raw)
    header["__metadata__"][key] = value
    return join(header, data)


def with_tensor_values(raw, name, edit):
    """The fixture with tensor `name`'s array passed through edit(array) (same dtype and size)."""
    header, data = split(raw)
    entry = header[name]
    begin, end = entry["data_offsets"]
    dtype = {"F32": np.float32, "I32": np.int32, "U8": np.uint8, "BF16": np.uint16}[entry["dtype"]]
    a = np.frombuffer(data[begin:end], dtype).copy()
    edit(a)
    return join(header, data[:begin] + a.tobytes() + data[end:])


def variants(raw):
    out = []
    for key in INTEGER_KEYS:
        for v in ODD_INTEGERS:
            out.append((f"meta_{key}={v!r}", with_meta(raw, key, v)))
    for key in REAL_KEYS:
        for v in ODD_REALS:
            out.append((f"meta_{key}={v!r}", with_meta(raw, key, v)))
    for key in BITS_KEYS:
        for v in ODD_BITS:
            out.append((f"meta_{key}={v!r}", with_meta(raw, key, v)))
    header, data = split(raw)
    for cut in (0, 4, 8, 20, len(raw) // 2, len(raw) - 1):
        out.append((f"truncated_at_{cut}", raw[:cut]))
    for byte in (0, 3, 7):
        flipped = bytearray(raw)
        flipped[byte] ^= 0x40
        out.append((f"length_byte_{byte}_flipped", bytes(flipped)))
    out.append(("nul_padded_header", join(header, data, pad=b"\0") if (len(json.dumps(header, separators=(",", ":"))) % 8)
                else join(dict(header, __pad__=None), data, pad=b"\0")))
    out.append(("trailing_byte", raw + b"\0"))
    out.append(("header_length_huge", struct.pack("<Q", 1 << 40) + raw[8:]))
    for name, field, value in (("expected", "dtype", "I32"), ("idx_q", "dtype", "F32"), ("written", "dtype", "I32"),
                               ("seq_lens", "shape", [0]), ("tolerance", "shape", [1, 1, 1]),
                               ("block_table", "data_offsets", [0, 4])):
        h = json.loads(json.dumps(header))
        h[name][field] = value
        out.append((f"tensor_{name}_{field}", join(h, data)))
    h = json.loads(json.dumps(header))
    h["idx_q"]["shape"] = [True] + h["idx_q"]["shape"][1:]
    out.append(("shape_holds_true", join(h, data)))
    h = json.loads(json.dumps(header))
    h["idx_q"]["shape"] = [1 << 64] + h["idx_q"]["shape"][1:]
    out.append(("shape_of_2_to_64", join(h, data)))
    h = json.loads(json.dumps(header))
    del h["tolerance"]
    out.append(("missing_tensor", join(h, data)))
    # Container rules: an entry's extra key, tensors with a gap or overlapping, strict JSON.
    h = json.loads(json.dumps(header))
    h["seq_lens"]["note"] = "x"
    out.append(("entry_with_an_extra_key", join(h, data)))
    # A gap: four bytes no tensor claims after the first tensor, every later tensor moved past them.
    first = min((n for n in header if n != "__metadata__" and header[n]["data_offsets"][1] > header[n]["data_offsets"][0]),
                key=lambda n: header[n]["data_offsets"][0])
    cut = header[first]["data_offsets"][1]
    h = json.loads(json.dumps(header))
    for n in h:
        if n != "__metadata__" and h[n]["data_offsets"][0] >= cut:
            h[n]["data_offsets"] = [h[n]["data_offsets"][0] + 4, h[n]["data_offsets"][1] + 4]
    out.append(("gap_after_a_tensor", join(h, data[:cut] + b"\0" * 4 + data[cut:])))
    # An overlap: tolerance (F32 [H, T, L]) laid over expected's bytes.
    h = json.loads(json.dumps(header))
    h["tolerance"]["data_offsets"] = h["expected"]["data_offsets"]
    out.append(("overlapping_tensors", join(h, data)))
    text = json.dumps(header, separators=(",", ":"))
    for what, edit in (("json_nan", text.replace('"__metadata__":{', '"__metadata__":{"x":NaN,', 1)),
                       ("json_infinity_in_a_shape", text.replace('"shape":[', '"shape":[Infinity,', 1)),
                       ("lone_surrogate_in_metadata", text.replace('"__metadata__":{', '"__metadata__":{"x":"\\ud800",', 1)),
                       ("lone_surrogate_key", text.replace('"__metadata__":{', '"__metadata__":{"\\udfff":"x",', 1))):
        blob = edit.encode()
        blob += b" " * ((8 - len(blob) % 8) % 8)
        out.append((what, struct.pack("<Q", len(blob)) + blob + data))
    h = json.loads(json.dumps(header))
    del h["__metadata__"]["case_class"]
    out.append(("missing_case_class", join(h, data)))
    deep = b'{"__metadata__":{},"x":' + b"[" * 200000 + b"]" * 200000 + b"}"
    out.append(("deeply_nested_header", struct.pack("<Q", len(deep)) + deep))
    out.append(("format_renamed", with_meta(raw, "format", "ctxscore-fixtures")))

    def written_two(a):
        a[np.argmax(a)] = 2
    out.append(("written_holds_2", with_tensor_values(raw, "written", written_two)))

    def expected_nan(a):
        a[np.isfinite(a) & (a != np.float32(-12345))] = np.nan
    out.append(("expected_nan_on_written", with_tensor_values(raw, "expected", expected_nan)))
    for factor in (1.0, 1.001, 100.0, 1e30):
        def scale(a, f=factor):
            a *= np.float32(f)
        out.append((f"tolerance_times_{factor:g}", with_tensor_values(raw, "tolerance", scale)))

    # NaN in the query rows a written element reads is outside the numeric model: no fixture holds it.
    def query_nan(a):
        a[...] = 0x7FC0
    out.append(("idx_q_all_nan", with_tensor_values(raw, "idx_q", query_nan)))

    # selection_margin is the expectation's: a stored one that is not is refused.
    def margin_halved(a):
        a[0] = a[0] / np.float32(2) if a[0] != 0 else np.float32(1)

    def margin_flt_max(a):
        a[...] = np.finfo(np.float32).max
    out.append(("selection_margin_element_0_changed", with_tensor_values(raw, "selection_margin", margin_halved)))
    out.append(("selection_margin_all_flt_max", with_tensor_values(raw, "selection_margin", margin_flt_max)))
    return out
