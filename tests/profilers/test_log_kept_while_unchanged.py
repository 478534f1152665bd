"""An import keeps the last log it read while the file is unchanged, by the same file identity the seeded-weights
cache keeps its checked digests under (`sessions.documents.input_files.file_identity`): a log rewritten in place with
its size and modification time put back is read again, not taken from what was kept; and lets go of it once the
variant is read (a 100 MB log is not held while the session is saved)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from profilers.trt_import import documents, text_layers
from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.importer import import_variant
from sessions.documents.input_files import file_identity
from tests.conftest import TESTS


def test_a_log_rewritten_with_its_size_and_time_put_back_is_read_again(tmp_path: Path):
    log = tmp_path / "trtexec.log"
    log.write_text("[I] first run\n")
    assert documents.read_text(log, "log") == "[I] first run\n"
    stamped = log.stat()
    time.sleep(0.05)  # past the coarse clock the file times are stamped with
    log.write_text("[I] other run\n")  # the same size
    os.utime(log, ns=(stamped.st_atime_ns, stamped.st_mtime_ns))
    assert (log.stat().st_size, log.stat().st_mtime_ns, log.stat().st_ino) == (
        stamped.st_size, stamped.st_mtime_ns, stamped.st_ino)  # the premise: only the change time tells
    assert documents.read_text(log, "log") == "[I] other run\n"


def test_the_identity_follows_a_link_to_the_file_it_names(tmp_path: Path):
    target, link = tmp_path / "a.log", tmp_path / "link.log"
    target.write_text("x")
    link.symlink_to(target)
    identity = file_identity(link)
    assert identity is not None and identity == file_identity(target)
    assert (identity.inode, identity.size) == (target.stat().st_ino, 1)
    assert file_identity(tmp_path / "missing.log") is None


def test_an_import_lets_go_of_the_log_it_read(tmp_path: Path):
    shutil.copy(TESTS / "data" / "trt_text" / "trt10-dumplayerinfo-dumpprofile.log", tmp_path / "run.log")
    found = files_of_folder(tmp_path)
    assert documents._LAST_TEXT[0] is not None  # the premise: classifying the folder kept the log
    import_variant(found.engines[0].files)
    assert documents._LAST_TEXT == [None, ""]
    assert text_layers._ONE_RUN == [None]
    assert documents.read_text(tmp_path / "run.log", "log") == (tmp_path / "run.log").read_text()  # read again
