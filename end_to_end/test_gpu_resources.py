"""CTest spreads the gpu label over a host's GPUs: every gpu test asks for
one GPU through a resource group, and with the committed example spec
(ci/ctest-gpus.json) each test process is given its own device. Checked
here with the spec's GPUs as fake ones: the binaries report the id CTest
assigned before they look for a device."""
import json
import os
import re
import subprocess
import textwrap

from conftest import SOURCE

SPEC = os.path.join(SOURCE, "ci", "ctest-gpus.json")


def test_every_gpu_test_asks_for_one_gpu(build_dir):
    shown = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1", "-L", "gpu"], capture_output=True,
                           text=True, check=True)
    tests = json.loads(shown.stdout)["tests"]
    assert tests, "no gpu tests in this build"
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        groups = props.get("RESOURCE_GROUPS")
        assert groups == [{"requirements": [{".type": "gpus", "slots": 1}]}], (t["name"], groups)


def test_the_example_spec_gives_each_test_process_its_own_gpu(build_dir, tmp_path):
    gpu_binary = os.path.join(build_dir, "property_tests", "ctxscore_gpu_properties")
    spec_ids = {g["id"] for g in json.load(open(SPEC))["local"][0]["gpus"]}
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(textwrap.dedent("""
        cmake_minimum_required(VERSION 3.25)
        project(spread NONE)
        enable_testing()
        foreach(k RANGE 1 12)
          add_test(NAME gpu_${k} COMMAND "GPU_BINARY" --gtest_filter=NoTestHasThisName)
          set_tests_properties(gpu_${k} PROPERTIES RESOURCE_GROUPS "gpus:1")
        endforeach()
    """).replace("GPU_BINARY", gpu_binary))
    subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build")], check=True, capture_output=True)
    done = subprocess.run(["ctest", "--test-dir", str(project / "build"), "-j", "4", "-V", "--resource-spec-file", SPEC],
                          capture_output=True, text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 0, done.stdout[-3000:]
    ids = re.findall(r"CTest resource: GPU (\d+) \(CUDA_VISIBLE_DEVICES=(\d+)\)", done.stdout)
    assert len(ids) == 12, done.stdout[-3000:]
    assert all(a == b and a in spec_ids for a, b in ids), ids
    assert len({a for a, _ in ids}) >= 2, ids  # four at a time: not all on one GPU
