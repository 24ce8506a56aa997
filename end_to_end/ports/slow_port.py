"""A correct port that takes its time: the numpy port after a sleep of
$SLOW_PORT_SECONDS (default 0.3) per call. For budgets and interruptions.
With $SLOW_PORT_CHILD_TAG it also leaves a daemon behind (detached with
setsid(), the tag in its command line), which the harness must end with the
port."""
import os
import subprocess
import sys
import time

if os.environ.get("SLOW_PORT_CHILD_TAG"):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", os.environ["SLOW_PORT_CHILD_TAG"]],
                     preexec_fn=os.setsid, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)

from ctxscore.ports import numpy_port


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out=None):
    time.sleep(float(os.environ.get("SLOW_PORT_SECONDS", "0.3")))
    return numpy_port.scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                             sm_scale, out)
