"""Errors that reach the user as one line and a documented exit code.

Every layer raises these; only the CLI and the TUI turn them into output.
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    FAILURE = 1  # a run failed, or `diff` found a regression
    USAGE = 2  # bad arguments or bad input files
    ENVIRONMENT = 3  # no GPU / TensorRT / CUPTI for what was asked
    INTERRUPTED = 130


class InspectError(Exception):
    """A failure with a one-line message meant for the user."""

    exit_code = ExitCode.FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(InspectError):
    """The user gave something we cannot use: a name, a path, a corrupt file."""

    exit_code = ExitCode.USAGE


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (an InspectError's own), or its type where it has none."""
    text = exc.message if isinstance(exc, InspectError) else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class MissingEnvironment(InspectError):
    """A GPU, TensorRT, CUPTI or another optional piece is not available."""

    exit_code = ExitCode.ENVIRONMENT


def joined_message(exc: BaseException, limit: int = 400) -> str:
    """The message on one line (libraries spread theirs over several), at most `limit` characters:
    long ones keep their start and their end, where cuDNN states the reason."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]} ... {text[-(limit - head - 5):]}"
