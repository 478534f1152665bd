"""One reader for the files the tool reads back: `sessions.documents.input_files` opens a file without
blocking and checks it on the descriptor; the start of a file for telling what it is, and raw traces, read through
it."""

from __future__ import annotations

import os
import threading

import pytest

from profilers import raw_trace
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_file_head
from tests.conftest import H200

TRACE = H200 / "senet154-fp16.trace.json"


def fifo_fed_with(tmp_path, data: bytes):
    """A FIFO a daemon thread writes `data` into once a reader opens it: a blocking reader would get the data."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)

    def feed() -> None:
        try:
            with open(fifo, "wb") as out:
                out.write(data)
        except OSError:  # the reader refused it and went
            pass

    threading.Thread(target=feed, daemon=True).start()
    return fifo


def test_read_file_head_reads_the_start_of_a_regular_file_only(tmp_path):
    data = bytes(range(256)) * 40
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert read_file_head(path, "file", 4096) == data[:4096]
    assert read_file_head(path, "file", 1 << 20) == data
    for target, words in ((fifo_fed_with(tmp_path, b"{}"), "not a regular file"), ("/dev/zero", "not a regular file"),
                          (tmp_path, "is a folder"), (tmp_path / "none", "no such file")):
        with pytest.raises(InputError, match=words):
            read_file_head(target, "file", 4096)


def test_a_raw_trace_is_read_like_a_session(tmp_path):
    """A FIFO (or a device) given as a raw trace is refused before a byte is read, never read as one."""
    assert raw_trace.load(TRACE).kernels  # a real one reads
    with pytest.raises(InputError, match="not a regular file"):
        raw_trace.load(fifo_fed_with(tmp_path, TRACE.read_bytes()))
