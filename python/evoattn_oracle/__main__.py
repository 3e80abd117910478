"""`python3 -m evoattn_oracle [--fake]`: serve the protocol of PROTOCOL.md on stdin/stdout.

Exit status: 0 after `shutdown` or the end of input; 3 when the real oracle cannot start (no
PyTorch, no GPU), with one line on stderr saying what to install or set."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from .server import Server

FAKE_ENV = "EVOATTN_ORACLE_FAKE"
EXIT_CANNOT_START = 3


def fake_requested(env: Mapping[str, str]) -> bool:
    """EVOATTN_ORACLE_FAKE set to anything but empty or 0."""
    return env.get(FAKE_ENV, "") not in ("", "0")


def protocol_stream() -> TextIO:
    """The process's stdout, kept for the protocol alone: file descriptor 1 (and sys.stdout) now
    lead to stderr, so a stray print from torch, a DSL compiler or a C library lands in the log
    instead of corrupting a response."""
    protocol_fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "w", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python3 -m evoattn_oracle", description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help=f"synthetic answers, no torch or GPU (also {FAKE_ENV}=1)")
    args = parser.parse_args()
    out = protocol_stream()
    if args.fake or fake_requested(os.environ):
        from .fake import FakeBackend

        backend = FakeBackend()
    else:
        # Kineto tears CUPTI down after each profiler session; a session that starts while the
        # last one's teardown is pending records no kernels (pytorch/kineto#1554), and the
        # profiler timer runs one session per block of samples.
        os.environ.setdefault("TEARDOWN_CUPTI", "0")
        try:
            from .torch_backend import StartupError, TorchBackend
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            print(
                f"PyTorch is not installed for {sys.executable}; install it (pip install torch) "
                f"or set EVOATTN_PYTHON to a Python that has it ({FAKE_ENV}=1 answers without it, for tests)",
                file=sys.stderr,
            )
            return EXIT_CANNOT_START
        try:
            backend = TorchBackend()
        except StartupError as e:
            print(e, file=sys.stderr)
            return EXIT_CANNOT_START
    Server(backend).serve(sys.stdin, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
