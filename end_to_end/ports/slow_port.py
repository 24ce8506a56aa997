"""A correct port that takes its time: the numpy port after a sleep of
$SLOW_PORT_SECONDS (default 0.3) per call. For budgets and interruptions."""
import os
import time

from ctxscore.ports import numpy_port


def scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len, sm_scale, out=None):
    time.sleep(float(os.environ.get("SLOW_PORT_SECONDS", "0.3")))
    return numpy_port.scores(idx_q, index_cache, block_table, seq_lens, max_seq_len, rank, world_size, max_query_len,
                             sm_scale, out)
