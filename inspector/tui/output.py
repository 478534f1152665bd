"""What libraries write straight to the process's stdout and stderr while a live study runs, kept off the screen.

C code writes to file descriptors 1 and 2, past Python's `sys.stdout` (the torch profiler's `USDT: ... profiler_stop`,
CUDA and cuDNN warnings): on a terminal that text lands on top of the app's screen and stays there. While a study
runs in the TUI both descriptors point into a pipe instead; its lines go to the study's log, and the app draws on a
copy of the terminal made before (`terminal_driver`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from textual.driver import Driver


class LibraryOutput:
    """File descriptors 1 and 2 redirected into a pipe between `start` and `stop`; each line read is handed to the
    sink `connect` gives (lines before that are kept and handed over on connecting)."""

    def __init__(self) -> None:
        self.terminal_fd: int | None = None  # a copy of the terminal (stderr as it was), for the app to draw on
        self._saved: tuple[int, int] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sink: Callable[[str], None] | None = None
        self._waiting: list[str] = []

    def start(self) -> None:
        """Point descriptors 1 and 2 into the pipe; Python's own buffers are flushed first, to where they were going."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self.terminal_fd = os.dup(2)
        self._saved = (os.dup(1), os.dup(2))
        read, write = os.pipe()
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(write)
        self._reader = threading.Thread(target=self._read, args=(read,), name="library-output", daemon=True)
        self._reader.start()

    def stop(self) -> None:
        """Descriptors 1 and 2 as they were; the reader hands on what is left in the pipe, then ends."""
        if self._saved is None:
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for fd, saved in zip((1, 2), self._saved, strict=False):
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = None
        if self._reader is not None:  # the pipe's last writer is gone: the reader sees its end
            self._reader.join(timeout=5)
        if self.terminal_fd is not None:
            os.close(self.terminal_fd)
            self.terminal_fd = None

    def connect(self, sink: Callable[[str], None]) -> None:
        """Hand every line to `sink` from now on (from the reader's thread), the lines kept so far first."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
            self._sink = sink
        for line in waiting:
            sink(line)

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self._lock:
                    sink = self._sink
                    if sink is None:
                        self._waiting.append(line)
                if sink is not None:
                    sink(line)


def terminal_driver(output: LibraryOutput) -> type[Driver]:
    """Textual's POSIX driver drawing on `output`'s terminal copy, its size read there too (POSIX only: on Windows
    `open_tui` redirects nothing and the app keeps Textual's own driver). The copy is read when the app starts its
    driver, so `output.start()` may come after the app is made but must come before `app.run()`."""
    from textual.drivers.linux_driver import LinuxDriver

    class TerminalCopyDriver(LinuxDriver):
        """LinuxDriver with its output file on the terminal copy, not on descriptor 2 (the pipe, while a study runs)."""

        def __init__(self, app, *, debug: bool = False, mouse: bool = True,
                     size: tuple[int, int] | None = None) -> None:
            super().__init__(app, debug=debug, mouse=mouse, size=size)
            if output.terminal_fd is None:
                raise RuntimeError("the library output must be redirected (start) before the app runs")
            self._terminal_fd = output.terminal_fd
            self._file: TextIO = open(self._terminal_fd, "w", encoding="utf-8", errors="replace",  # noqa: SIM115
                                      closefd=False)

        def _get_terminal_size(self) -> tuple[int, int]:
            try:
                return tuple(os.get_terminal_size(self._terminal_fd))  # type: ignore[return-value]
            except OSError:
                return super()._get_terminal_size()

    return TerminalCopyDriver
