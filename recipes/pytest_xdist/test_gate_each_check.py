"""The pytest gate as one item per check, spread over one host's GPUs by
pytest-xdist, one worker per GPU:

    KERNEL=my_kernel:scores SEED=7 pytest -n 8 recipes/pytest_xdist/

Worker gwN gates on GPU N alone (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES),
so that the ports its gates start see that device only. DEVICE=cpu (with
TENSORS=numpy for a numpy kernel) gates on the host and leaves out
large_offsets, which needs about 14 GiB there. SEED pins every check to one
campaign; without it each check draws its own and prints it."""
import os

import pytest

from ctxscore.pytest_plugin import CHECKS, gate

KERNEL = os.environ.get("KERNEL", "my_kernel:scores")
DEVICE = os.environ.get("DEVICE", "cuda")
TENSORS = os.environ.get("TENSORS") or None
SEED = int(os.environ["SEED"]) if os.environ.get("SEED") else None

if DEVICE != "cpu":
    gpu = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["HIP_VISIBLE_DEVICES"] = gpu


@pytest.mark.parametrize("check", [c for c in CHECKS if DEVICE != "cpu" or c != "large_offsets"])
def test_gate(check):
    gate(KERNEL, checks=[check], device=DEVICE, tensors=TENSORS, seed=SEED)
