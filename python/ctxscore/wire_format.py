"""What the Python and C++ sides share, as wire_format.json states it: the
fixture format's versions, the protocol's framing, the exit statuses, a
port's device-unavailable status, the failure folder's policy and the
escape rule of shown text; the one statement of these values, which the
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
EXIT_STATUS = {name: int(code) for name, code in _WIRE["exit_status"].items()}  # the harness's: passed, failed, ...
PORT_EXIT_DEVICE_UNAVAILABLE = int(_WIRE["port_exit_device_unavailable"])  # a port's, before hello (EX_UNAVAILABLE)
FAILURE_DIR_VARIABLE = _WIRE["failure_dir_variable"]  # where failing cases go when no folder is named
FAILURE_DIR_DEFAULT = _WIRE["failure_dir_default"]  # else this folder
ESCAPE = dict(_WIRE["escape"])  # how shown text escapes a character: control_below, delete, prefix, hex_digits


def frame_length(n):
    return n.to_bytes(FRAME_LENGTH_BYTES, "little")


def read_frame_length(head):
    return int.from_bytes(head, "little")
