"""The fixture format's versions and the protocol's framing, as
wire_format.json states them: the one statement of these numbers, which the
C++ side reads too (fixtures/wire_format.json)."""
import json
import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire_format.json"), encoding="utf-8") as _f:
    _WIRE = json.load(_f)

FIXTURE_FORMAT_VERSION = int(_WIRE["fixture_format_version"])  # the newest a reader takes
OLDEST_FIXTURE_FORMAT_VERSION = int(_WIRE["oldest_fixture_format_version"])
PROTOCOL_VERSION = int(_WIRE["protocol_version"])
FRAME_LENGTH_BYTES = int(_WIRE["frame_length_bytes"])  # a frame: its length, little-endian, then the message
CALL_TENSORS = tuple(_WIRE["call_tensors"])  # the storages a call's request may hold, each 1-D


def frame_length(n):
    return n.to_bytes(FRAME_LENGTH_BYTES, "little")


def read_frame_length(head):
    return int.from_bytes(head, "little")
