"""Every file read from outside passes `sessions.documents.input_files` (a regular file, a size limit, bounded nesting
and integers), and what a reader cannot use is one line: sweep matrices, `--groups` rules files, sessions."""

from __future__ import annotations

import copy
import os

import pytest

from inspector.cli import main
from sessions.documents import storage
from tests.conftest import DATA, H200

SESSION = H200 / "segformer-b0-probe-b1.json"
MERGED = H200 / "sweep-2gpu-merged.json"


def hostile_files(tmp_path) -> dict[str, str]:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    nested = tmp_path / "nested.toml"
    nested.write_text("a = " + "[" * 65 + "]" * 65 + "\n")  # past the 64 levels a reader accepts
    huge = tmp_path / "huge.toml"
    huge.write_text("[base]\nseed = 99999999999999999999999999\n[axes]\nmodel = ['x']\n")
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    return {"/dev/zero": "not a regular file", str(fifo): "not a regular file", str(deep): "nested more than",
            str(nested): "nested more than", str(huge): "out of range", str(big): "over the 1 MiB",
            str(tmp_path): "is a folder"}


@pytest.mark.parametrize("command", [["sweep", "--dry-run", "--out", "{tmp}/s"], ["groups", str(SESSION), "--groups"]])
def test_matrices_and_rules_files_are_checked_before_they_are_read(tmp_path, capsys, command):
    for path, message in hostile_files(tmp_path).items():
        if command[0] == "groups" and "huge" in path:
            continue  # a rules file has no integers to bound: its own shape check names it
        args = [a.format(tmp=tmp_path) for a in command]
        args = [*args[:1], path, *args[1:]] if command[0] == "sweep" else [*args, path]
        assert main(args) == 2, path
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err, (path, err)


def test_a_session_pipe_device_or_folder_is_one_line(tmp_path, capsys):
    fifo = tmp_path / "s.json"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero", str(tmp_path)):
        assert main(["show", path]) == 2
        assert "not a regular file" in capsys.readouterr().err or path == str(tmp_path)


@pytest.mark.parametrize("job", [99, -1])
def test_a_merged_variant_naming_a_job_outside_the_merge_is_one_line(tmp_path, capsys, job):
    session = copy.deepcopy(storage.load(MERGED))
    session.variants[1].job = job
    path = tmp_path / "m.json"
    path.write_bytes(storage.encode(session))
    for command in (["export", str(path), "--format", "matrix"], ["show", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"names job {job}, but the session merges 4 jobs" in err and len(err.splitlines()) == 1


def test_the_study_export_of_an_import_without_trtexec_metadata(tmp_path, capsys):
    path = tmp_path / "g.json"
    assert main(["import", "--layers", str(DATA / "fuzz" / "trt10.layers.json"), "--no-metadata-search",
                 "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["export", str(path), "--format", "study"]) == 0
    method = [line for line in capsys.readouterr().out.splitlines() if line.startswith("- Batch")]
    assert method and "unknown of warm-up" in method[0]


def test_rerun_of_a_cuda_session_without_a_gpu_is_one_line_exit_3(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on a machine with a GPU
    assert main(["rerun", str(H200 / "senet154-h200-torchprof.json"), "--out", str(tmp_path / "r.json")]) == 3
    err = capsys.readouterr().err
    assert err == "trt-inspect: error: the plan runs on CUDA, and no CUDA GPU is visible to PyTorch here\n"


def test_a_backtracking_pattern_in_a_rules_file_stops_with_one_line(tmp_path, capsys):
    import time

    session = copy.deepcopy(storage.load(SESSION))
    session.variants[0].layers[0].name = "a" * 40 + "!"
    path = tmp_path / "s.json"
    storage.save(session, path)
    rules = tmp_path / "r.toml"
    rules.write_text('[[roles]]\nname = "slow"\nnames = ["(a|aa)+$"]\n')
    started = time.monotonic()
    assert main(["groups", str(path), "--groups", str(rules)]) == 2
    err = capsys.readouterr().err
    assert "roles[0].names: the regular expression '(a|aa)+$' ran over" in err and len(err.splitlines()) == 1
    assert time.monotonic() - started < 60  # 2**40 steps without the bound
