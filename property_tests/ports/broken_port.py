"""A port that speaks hello correctly, then misbehaves on its first score,
time, capture or replay request in the way its argument names; the harness must give each a
verdict naming what it did and reap the child. Writes its pid to
$CTXSCORE_TEST_PIDFILE so a test can check that it is gone."""
import os
import sys
import time

import numpy as np

from ctxscore import safetensors
from ctxscore.port import read_frame, write_frame
from ctxscore.wire_format import frame_length

behaviour = sys.argv[1]
if os.environ.get("CTXSCORE_TEST_PIDFILE"):
    with open(os.environ["CTXSCORE_TEST_PIDFILE"], "w") as f:
        f.write(str(os.getpid()))
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer


def reply(tensors, meta):
    write_frame(stdout, safetensors.encode(tensors, meta))


while True:
    frame = read_frame(stdin)
    if frame is None:
        sys.exit(0)
    t, m = safetensors.decode(frame, "request")
    if m["message"] == "hello":
        if behaviour == "hang_at_hello":
            time.sleep(3600)
        if behaviour == "setsid_child":  # a descendant out of the port's process group, as a daemon makes one
            child = os.fork()
            if child == 0:
                os.setsid()
                time.sleep(3600)
                os._exit(0)
            with open(os.environ["CTXSCORE_TEST_PIDFILE"] + ".child", "w") as f:
                f.write(str(child))
        protocol = {"protocol": "999"} if behaviour == "other_protocol" else {}
        supports = "score,time" + (",capture" if behaviour in ("capture_raises", "replay_raises") else "")
        reply({}, {"message": "hello", "name": "broken:" + behaviour, "supports": supports, **protocol})
        if behaviour == "never_reads":
            time.sleep(3600)
        if behaviour == "sleeps_before_reading":
            time.sleep(5)
        continue
    if m["message"] == "time":  # figures no measurement gives
        asked = int(m["calls"])
        median_us, calls = {"timing_zero": ("0", asked), "timing_fewer_calls": ("10", asked - 1),
                            "timing_longer_than_the_wait": ("1000000", asked)}[behaviour]
        reply({}, {"message": "timing", "median_us": median_us, "calls": str(calls), "method": "made up",
                   "copy_gb_per_s": "100"})
        continue
    if m["message"] == "capture":  # records a graph, or says it failed to
        if behaviour == "capture_raises":
            reply({}, {"message": "error", "reason": "RuntimeError: the capture was invalidated"})
        else:
            reply({}, {"message": "captured"})
        continue
    if m["message"] == "replay" and behaviour == "replay_raises":
        reply({}, {"message": "error", "reason": "RuntimeError: an illegal memory access was encountered"})
        continue
    out = t.get("out")
    good = {"out": np.array(out, np.float32)} if out is not None else {}
    if behaviour == "crash":
        os.abort()
    elif behaviour == "exit":
        sys.exit(3)
    elif behaviour == "hang":
        time.sleep(3600)
    elif behaviour == "truncated":  # half a reply, then gone
        data = safetensors.encode(good, {"message": "scores"})
        stdout.write(frame_length(len(data)) + data[: len(data) // 2])
        stdout.flush()
        sys.exit(0)
    elif behaviour == "garbage_bytes":
        stdout.write(frame_length(64) + os.urandom(64))
        stdout.flush()
    elif behaviour == "huge_length":
        stdout.write(frame_length(1 << 40))
        stdout.flush()
        time.sleep(3600)
    elif behaviour == "huge_announced_reply":  # plausible for some reply, far more than this request's
        stdout.write(frame_length(3 << 30))
        stdout.flush()
        time.sleep(3600)
    elif behaviour == "sleeps_before_reading":
        reply(good, {"message": "scores"})
    elif behaviour == "wrong_kind":
        reply({}, {"message": "geometry"})
    elif behaviour == "wrong_shape":
        reply({"out": np.zeros(3, np.float32)}, {"message": "scores"})
    elif behaviour == "wrong_dtype":
        reply({"out": np.zeros(out.shape if out is not None else 1, np.int32)}, {"message": "scores"})
    elif behaviour in ("garbage_scores", "setsid_child"):  # a well-formed reply of wrong values
        if out is not None:
            good["out"] = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
        reply(good, {"message": "scores"})
    elif behaviour == "raises":
        reply({}, {"message": "error", "reason": "RuntimeError: the kernel refused"})
    else:
        raise SystemExit(f"unknown behaviour {behaviour}")
