# The one place the version is written: the wheel's metadata, `ctxscore
# --version` (CMake reads this line) and ctxscore.__version__ all take it.
__version__ = "0.4.0"
