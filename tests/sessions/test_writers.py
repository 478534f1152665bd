"""Every command that writes a file goes through one rule (`sessions.documents.storage.session_writer`,
`check_replaceable`, `write_atomically`): the session lock, no writing over links, devices or FIFOs, no
replacing a session without --force, never over a merge's own input, the umask's mode."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import tests.fake_backend
from inspector.cli import main
from inspector.study import run_study
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import DATA, H200, ROOT, run_cli, run_cli_process
from tests.inspector.test_study_fake import fake_plan

LAYERS = DATA / "fuzz" / "trt10.layers.json"
SESSION = H200 / "segformer-b0-probe-b1.json"


def one_error_line(result: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def imported(tmp_path, name: str = "base"):
    path = tmp_path / "s.json"
    assert main(["import", "--layers", str(LAYERS), "--name", name, "--out", str(path)]) == 0
    return path


def test_concurrent_imports_into_one_session_keep_every_variant(tmp_path):
    path = imported(tmp_path)
    names = [f"v{i}" for i in range(6)]
    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(lambda n: run_cli_process("import", "--layers", str(LAYERS), "--name", n,
                                                          "--into", str(path)),
                                names))
    assert [r.returncode for r in results] == [0] * len(names), [r.stderr for r in results]
    assert sorted(v.name for v in storage.load(path).variants) == ["base", *names]


def test_an_import_while_another_command_writes_the_session_is_refused(tmp_path, monkeypatch, capsys):
    path = imported(tmp_path)
    monkeypatch.setattr(storage, "LOCK_WAIT_S", 0.2)
    with storage.session_lock(path):  # a run holding the file
        assert main(["import", "--layers", str(LAYERS), "--name", "late", "--into", str(path)]) == 2
    assert "being written by another trt-inspect command" in capsys.readouterr().err
    assert [v.name for v in storage.load(path).variants] == ["base"]


def test_a_merge_never_writes_over_one_of_its_inputs(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(SESSION.read_bytes())
    b.write_bytes((H200 / "segformer-b0-probe-b32.json").read_bytes())
    before = b.read_bytes()
    line = one_error_line(run_cli("merge", str(a), str(b), "--out", str(b), "--force"))
    assert "is one of the sessions to merge" in line and b.read_bytes() == before
    link = tmp_path / "link.json"
    link.symlink_to(b)
    assert "is one of the sessions to merge" in one_error_line(run_cli("merge", str(a), str(link), "--out", str(b)))


def special_targets(tmp_path) -> dict[str, os.PathLike]:
    """A FIFO, a character device (the same numbers as /dev/null), a link to a session and a dangling link."""
    fifo, device, link, dangling = (tmp_path / n for n in ("fifo.json", "null.json", "link.json", "dangling.json"))
    os.mkfifo(fifo)
    if os.geteuid() == 0:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    (tmp_path / "real.json").write_bytes(SESSION.read_bytes())
    link.symlink_to(tmp_path / "real.json")
    dangling.symlink_to(tmp_path / "elsewhere.json")
    return {"fifo": fifo, "link": link, "dangling": dangling, **({"device": device} if device.exists() else {})}


def kind_of(path) -> str:
    mode = os.lstat(path).st_mode
    return "link" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else "char" if stat.S_ISCHR(mode) else "file"


@pytest.mark.parametrize("command", [
    ["import", "--layers", str(LAYERS), "--force", "--out"],
    ["merge", str(SESSION), "--force", "--out"],
    ["export", str(SESSION), "--force", "-o"],
    ["import", "--layers", str(LAYERS), "--name", "x", "--into"],
])
def test_writers_never_replace_or_follow_a_device_a_fifo_or_a_link(tmp_path, command):
    targets = special_targets(tmp_path)
    real = (tmp_path / "real.json").read_bytes()
    for name, target in targets.items():
        if "--into" in command and name != "link":
            continue  # --into reads first: a FIFO or a device is refused by the reader, a dangling link is no session
        kind = kind_of(target)
        result = run_cli(*command, str(target))
        line = one_error_line(result)
        assert "symbolic link" in line or "device, a pipe or a socket" in line or "not a regular file" in line, line
        assert kind_of(target) == kind
    assert (tmp_path / "real.json").read_bytes() == real and not (tmp_path / "elsewhere.json").exists()


def test_run_import_and_merge_refuse_to_replace_a_session_without_force(tmp_path, monkeypatch):
    existing = tmp_path / "s.json"
    existing.write_bytes(SESSION.read_bytes())
    loaded = []
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "load_inputs", classmethod(lambda cls, plan: loaded.append(1)))
    with pytest.raises(InputError, match="exists; pass --force"):
        run_study(fake_plan(tmp_path, out=str(existing)), [], lambda p: None)
    assert loaded == []  # refused before any work
    for command in (["import", "--layers", str(LAYERS), "--out"],
                    ["merge", str(H200 / "segformer-b0-probe-b32.json"), "--out"]):
        assert "exists; pass --force to replace it" in one_error_line(run_cli(*command, str(existing)))
    assert existing.read_bytes() == SESSION.read_bytes()
    assert run_cli("import", "--layers", str(LAYERS), "--force", "--out", str(existing)).returncode == 0


def test_a_rerun_into_a_finished_session_killed_after_setup_leaves_the_finished_one(tmp_path):
    path = tmp_path / "s.json"
    run_study(fake_plan(tmp_path, out=str(path)), [], lambda p: None)
    finished = path.read_bytes()

    def killed_after_first_save(progress):
        if progress.session_path is not None and progress.phase == "setup":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_study(fake_plan(tmp_path, out=str(path)), [], killed_after_first_save, force=True)
    assert path.read_bytes() == finished
    assert storage.load(storage.partial_path(path)).variants == []  # what the rerun saved is kept beside it
    session, saved = run_study(fake_plan(tmp_path, out=str(path)), [], lambda p: None, force=True)
    assert saved == path and path.read_bytes() != finished and not storage.partial_path(path).exists()
    assert [v.name for v in storage.load(path).variants] == [v.name for v in session.variants]


def test_the_lock_file_is_opened_without_following_a_planted_link(tmp_path):
    target = tmp_path / "elsewhere" / "x"
    target.parent.mkdir()
    (tmp_path / ".r.json.lock").symlink_to(target)
    with pytest.raises(InputError, match="symbolic link"):
        run_study(fake_plan(tmp_path, out=str(tmp_path / "r.json")), [], lambda p: None)
    assert not target.exists()


def test_export_keeps_the_umask_mode_and_the_replaced_file_mode(tmp_path):
    fresh, kept = tmp_path / "fresh.md", tmp_path / "kept.md"
    kept.write_text("old")
    kept.chmod(0o640)
    env_umask = "import os, runpy, sys; os.umask(0o022); sys.argv = ['trt-inspect', *sys.argv[1:]]; "
    code = env_umask + "runpy.run_module('inspector', run_name='__main__')"
    for target, extra in ((fresh, []), (kept, ["--force"])):
        result = subprocess.run([sys.executable, "-c", code, "export", str(SESSION), "-o", str(target), *extra],
                                capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
        assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640


def test_a_closed_stdout_is_one_line(tmp_path):
    result = subprocess.run(f"{sys.executable} -m inspector export {SESSION} >&-", shell=True, capture_output=True,
                            text=True, cwd=ROOT, timeout=300, check=False)
    assert "standard output is closed" in one_error_line(result, 1)


EXIT_AFTER_DONE = """
import atexit, os, signal, sys, time
import inspector.cli as cli
{setup}
sys.argv = ['trt-inspect', 'show', {session!r}]
cli.run()
"""
TERM = "os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2)"


@pytest.mark.parametrize("setup, code, line", [
    # in the interpreter's teardown: the command's own code, no line
    (f"atexit.register(lambda: ({TERM.replace('; ', ', ')}))", 0, ""),
    # just as the command returned: the documented exit 130 with a line
    (f"real = cli.main\ndef main():\n    code = real()\n    {TERM}\n    return code\ncli.main = main", 130,
     "trt-inspect: interrupted\n"),
])
def test_sigterm_after_the_command_is_done_is_the_documented_exit(setup, code, line):
    script = EXIT_AFTER_DONE.format(setup=setup, session=str(SESSION))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            check=False)
    assert (result.returncode, result.stderr) == (code, line)
    assert result.returncode != 128 + signal.SIGTERM
