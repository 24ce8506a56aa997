"""A port that records graphs on the CPU, so that the capture properties and
`fixtures check --capture` run where no GPU is: a recorded "graph" keeps the
captured call's storages and arguments and, on a replay, scores whatever the
harness wrote into those storages (the numpy port's arithmetic).

    graph_port.py right   a faithful graph
    graph_port.py stale   a planted capture bug: the replay scores the inputs
                          the graph was recorded with, not the new contents
"""
import sys

import numpy as np

from ctxscore import port
from ctxscore.ports import numpy_port
from ctxscore.tensors import Buffers, widen_bf16

STORAGES = (("idx_q", "q_base"), ("index_cache", "cache_base"), ("block_table", "table_base"), ("seq_lens", "lens_base"))


class GraphWorker(port.Worker):
    def __init__(self, stale):
        super().__init__(numpy_port.scores, None, Buffers("numpy", "cpu"), "graph:" + ("stale" if stale else "right"))
        self.stale = stale

    def can_capture(self):
        return True

    def capture(self, t, m):
        call = port.Call(self.buffers, t, m)
        call.run(self.fn)
        self.captured = call
        return {}, {"message": "captured"}

    def replay(self, t, m):
        if self.captured is None:
            raise ValueError("replay before any capture")
        call = self.captured
        inputs = [] if self.stale else [(name, getattr(call, attr)) for name, attr in STORAGES]
        for name, base in inputs + [("out", call.out_base)]:
            values = widen_bf16(t[name]) if t[name].dtype == np.uint16 else t[name]
            if values.size != base.size:
                raise ValueError(f"replay's {name} storage has {values.size} elements, the captured one {base.size}")
            base[...] = values
        call.run(self.fn)
        return self.reply_scores(call, call.out)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("right", "stale"):
        raise SystemExit("usage: graph_port.py right|stale")
    sys.exit(GraphWorker(sys.argv[1] == "stale").serve(sys.stdin.buffer, sys.stdout.buffer))
