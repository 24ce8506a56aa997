"""ctxscore for Python: read the harness's fixtures, check an implementation
of the context-parallel block scoring against them, and serve one to the
harness as a port (``python3 -m ctxscore.port module:function``).

The operator's contract is ``reference/CONTRACT.md`` of the ctxscore
repository; the fixture format is ``fixtures/FORMAT.md``, the port protocol
``fixtures/PROTOCOL.md``.
"""
from ._version import __version__
