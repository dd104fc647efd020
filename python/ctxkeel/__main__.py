"""``python -m ctxkeel`` and the ``ctxkeel`` console script: the ctxkeel command, which is the
C core's own (``ck_cli_main``), the same code as the csrc/cli program and the npm bin."""

import sys

from . import _ext


def main(argv=None):
    """Runs the command with ``argv`` (default: ``sys.argv[1:]``) and returns its exit status:
    0 success, 1 violations found (check), 2 bad usage or input."""
    args = sys.argv[1:] if argv is None else list(argv)
    # The command writes through C stdio; what Python buffered must come out first.
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    return _ext._cli_main(["ctxkeel", *[str(a) for a in args]])


if __name__ == "__main__":
    sys.exit(main())
