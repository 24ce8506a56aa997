"""The `ctxscore` command (and `python -m ctxscore`): runs the harness binary
bundled with this package, or $CTXSCORE_BIN where set."""
import os
import sys

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_harness", "bin", "ctxscore")


def binary():
    """The harness binary: $CTXSCORE_BIN, else the bundled one; None when neither exists."""
    chosen = os.environ.get("CTXSCORE_BIN")
    if chosen:
        return chosen
    return BUNDLED if os.access(BUNDLED, os.X_OK) else None


MISSING = ("ctxscore: this install has no harness binary ({}): it was installed with CTXSCORE_PYTHON_ONLY=1. "
           "Install a ctxscore wheel for this platform, or reinstall from the source distribution without "
           "CTXSCORE_PYTHON_ONLY (it needs CMake, a C++17 compiler, Eigen, nlohmann-json, RapidCheck and CLI11), or set "
           "CTXSCORE_BIN to a built `ctxscore`. The checker (python -m ctxscore.check) and the port worker "
           "(python -m ctxscore.port) work without it.")


def main(argv=None):
    found = binary()
    if not found:
        print(MISSING.format(BUNDLED), file=sys.stderr)
        return 2
    args = sys.argv[1:] if argv is None else list(argv)
    os.execv(found, [found] + args)


if __name__ == "__main__":
    sys.exit(main())
