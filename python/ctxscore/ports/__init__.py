"""Implementations of the operator written for this project, to exercise the
harness and the port protocol: a numpy port, a torch port and a Triton port,
each with planted bugs the harness must catch."""
