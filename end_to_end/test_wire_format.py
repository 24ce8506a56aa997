"""What the C++ and Python sides share is stated once, in
fixtures/wire_format.json (the fixture format's versions, the protocol's
framing, the exit statuses, a port's device-unavailable status, the failure
folder's policy, the escape rule of shown text): the C++ side compiles it, the Python package reads it
through its link, the binary and the documents do what it says."""
import json
import os
import re
import sys

from conftest import SOURCE

sys.path.insert(0, os.path.join(SOURCE, "python"))

WIRE = json.load(open(os.path.join(SOURCE, "fixtures", "wire_format.json"), encoding="utf-8"))


def test_the_python_package_reads_the_one_statement():
    from ctxscore import wire_format
    assert os.path.samefile(os.path.join(SOURCE, "python", "ctxscore", "wire_format.json"),
                            os.path.join(SOURCE, "fixtures", "wire_format.json"))
    assert wire_format.FIXTURE_FORMAT_VERSION == WIRE["fixture_format_version"]
    assert wire_format.OLDEST_FIXTURE_FORMAT_VERSION == WIRE["oldest_fixture_format_version"]
    assert wire_format.PROTOCOL_VERSION == WIRE["protocol_version"]
    assert len(wire_format.frame_length(5)) == WIRE["frame_length_bytes"]
    assert wire_format.EXIT_STATUS == WIRE["exit_status"]
    assert wire_format.PORT_EXIT_DEVICE_UNAVAILABLE == WIRE["port_exit_device_unavailable"]
    assert (wire_format.FAILURE_DIR_VARIABLE, wire_format.FAILURE_DIR_DEFAULT) == (WIRE["failure_dir_variable"],
                                                                                   WIRE["failure_dir_default"])
    assert wire_format.ESCAPE == WIRE["escape"]


def test_the_documents_name_the_versions_stated():
    heading = lambda name: open(os.path.join(SOURCE, "fixtures", name), encoding="utf-8").readline()
    assert re.search(r"version (\d+)$", heading("FORMAT.md").strip()).group(1) == str(WIRE["fixture_format_version"])
    assert re.search(r"version (\d+)$", heading("PROTOCOL.md").strip()).group(1) == str(WIRE["protocol_version"])


def test_the_cpp_side_compiles_the_same_numbers(build_dir):
    header = open(os.path.join(build_dir, "fixtures", "include", "ctxscore", "wire_format.hpp"), encoding="utf-8").read()
    stated = dict(re.findall(r"inline constexpr [\w:]+ k(\w+) = (\d+);", header))
    assert stated == {"FixtureFormatVersion": str(WIRE["fixture_format_version"]),
                      "OldestFixtureFormatVersion": str(WIRE["oldest_fixture_format_version"]),
                      "ProtocolVersion": str(WIRE["protocol_version"]),
                      "FrameLengthBytes": str(WIRE["frame_length_bytes"]),
                      "DeviceUnavailableExit": str(WIRE["port_exit_device_unavailable"]),
                      "EscapeControlBelow": str(WIRE["escape"]["control_below"]),
                      "EscapeDelete": str(WIRE["escape"]["delete"]),
                      "EscapeHexDigits": str(WIRE["escape"]["hex_digits"])}
    statuses = dict(re.findall(r"^  k(\w+) = (\d+),$", header, re.M))
    assert statuses == {"".join(w.capitalize() for w in name.split("_")): str(code)
                        for name, code in WIRE["exit_status"].items()}, statuses
    strings = dict(re.findall(r'inline constexpr const char\* k(\w+) = "([^"]*)";', header))
    assert strings == {"FailureDirVariable": WIRE["failure_dir_variable"], "FailureDirDefault": WIRE["failure_dir_default"],
                       "EscapePrefix": WIRE["escape"]["prefix"].replace("\\", "\\\\")}  # as a C++ literal spells it


def test_both_sides_escape_a_byte_alike(run):
    from ctxscore.check import printable
    word = "frob\x01nic\x7fate"
    refused = run(word)
    assert refused.returncode == WIRE["exit_status"]["bad_input"]
    shown = printable(word)
    assert shown == "frob" + WIRE["escape"]["prefix"] + "01nic" + WIRE["escape"]["prefix"] + "7fate"
    assert shown in refused.stderr, refused.stderr


def test_the_binary_exits_and_writes_as_stated(run, port_command, tmp_path):
    exits = WIRE["exit_status"]
    assert run("frobnicate").returncode == exits["bad_input"]
    assert run("fuzz", "--cases", "3", "--seed", "1", "--case-size", "small").returncode == exits["passed"]
    planted = run("fuzz", "--cases", "20", "--seed", "1", "--case-size", "small", "--port",
                  port_command("ctxscore.ports.numpy_port:cutoff_slack_one"),
                  env={WIRE["failure_dir_variable"]: str(tmp_path / "named")})
    assert planted.returncode == exits["failed"], planted.stdout + planted.stderr
    assert os.listdir(tmp_path / "named"), "no fixture where the variable points"
