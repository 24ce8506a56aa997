"""The fixture format's versions and the protocol's framing are stated once,
in fixtures/wire_format.json: the C++ side compiles them from it, the Python
package reads it through its link, and the documents name the same."""
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
                      "FrameLengthBytes": str(WIRE["frame_length_bytes"])}
