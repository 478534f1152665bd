"""The CLI's exit after a study on CUDA skips the interpreter's teardown: nothing printed may be lost."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SESSION = "tests/data/h200/segformer-b0-probe-b1.json"
RUN = ("import sys, inspector.cli as cli, inspector.process as process; process.holds_cuda = lambda: {holds}; "
       "sys.argv = ['trt-inspect', *sys.argv[1:]]; cli.run()")


def run_cli(holds_cuda: bool, *args: str, stdout=subprocess.PIPE, unbuffered: bool = False):
    # stdout into a pipe or a file is block-buffered unless PYTHONUNBUFFERED says otherwise
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run([sys.executable, "-c", RUN.format(holds=holds_cuda), *args], check=False, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120, env=env)


@pytest.mark.parametrize("args", [("show", SESSION), ("export", SESSION), ("show", "no-such-session.json")])
def test_the_fast_exit_prints_and_returns_what_the_normal_exit_does(args):
    normal, fast = run_cli(False, *args), run_cli(True, *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (normal.returncode, normal.stdout, normal.stderr)
    assert len(normal.stdout) > 1000 or normal.returncode == 2  # a full table, or the error line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("holds_cuda", [False, True])
def test_output_that_cannot_be_written_is_a_failure(holds_cuda):
    with open("/dev/full", "w") as full:
        buffered = run_cli(holds_cuda, "show", SESSION, stdout=full)
        unbuffered = run_cli(holds_cuda, "show", SESSION, stdout=full, unbuffered=True)
    assert buffered.returncode == 120  # what Python's own exit returns when the last flush fails
    assert unbuffered.returncode == 1 and unbuffered.stderr == "trt-inspect: error: No space left on device\n"


def test_an_os_error_out_of_a_command_is_one_line_naming_its_file(monkeypatch, capsys):
    import errno

    from inspector import cli

    def fails(args):
        raise OSError(errno.EACCES, "Permission denied", "/some/where.json")

    monkeypatch.setitem(cli.COMMANDS, "show", fails)
    assert cli.main(["show", "x.json"]) == 1
    assert capsys.readouterr().err == "trt-inspect: error: /some/where.json: Permission denied\n"


POOL_THEN_EXIT = """
import inspector.process as process
from builders.engine.compiler import _new_pool
process.holds_cuda = lambda: True
if __name__ == "__main__":
    pool = _new_pool(2)  # the plan compiler's pool, its workers alive: they end when this process does
    assert pool.submit(abs, -3).result() == 3
    process.exit_process(0)
"""


def stderr_of_script(tmp_path, text: str) -> str:
    """The standard error of `text` run as a script (it must exit 0), the resource tracker's warnings included: the
    tracker outlives the process and prints on the stderr they share, so the run waits for it (and for the workers,
    which hold that stderr too until they see the process gone)."""
    script = tmp_path / "script.py"
    script.write_text(text)
    ended = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ended.returncode == 0, ended.stderr
    return ended.stderr


def test_the_fast_exit_leaves_no_semaphore_of_a_live_worker_pool_to_the_resource_tracker(tmp_path):
    assert "leaked semaphore" not in stderr_of_script(tmp_path, POOL_THEN_EXIT)


WORKER_LOCK_THEN_EXIT = """
import multiprocessing
import inspector.process as process
from builders.engine.compiler import PlanCompiler, _new_pool
process.holds_cuda = lambda: True

def make_lock():
    global LOCK
    LOCK = multiprocessing.RLock()  # as tqdm makes one in a worker when Inductor traces a region
    return True

if __name__ == "__main__":
    compiler = PlanCompiler(0)
    compiler._pool = _new_pool(2)  # as `PlanCompiler._pool_for` starts it on a machine with the cores for it
    assert all(compiler._pool.submit(make_lock).result() for _ in range(4))
    compiler.close()  # the workers ended by SIGTERM, as before a study's timing rounds
    process.exit_process(0)
"""


def test_a_lock_a_library_makes_in_a_plan_compiler_worker_leaves_no_semaphore_to_the_resource_tracker(tmp_path):
    assert "leaked semaphore" not in stderr_of_script(tmp_path, WORKER_LOCK_THEN_EXIT)


@pytest.mark.parametrize("module", ["inspector", "inspector.cli"])
def test_both_module_entry_points_run_the_cli(module):
    shown = subprocess.run([sys.executable, "-m", module, "show", SESSION], capture_output=True, text=True,
                           timeout=120, check=False, cwd=ROOT)
    wrong = subprocess.run([sys.executable, "-m", module, "show", SESSION, "--no-such-option"], capture_output=True,
                           text=True, timeout=120, check=False, cwd=ROOT)
    assert shown.returncode == 0 and shown.stdout.startswith("segformer  batch 1") and len(shown.stdout) > 1000
    assert wrong.returncode == 2 and "unrecognized arguments: --no-such-option" in wrong.stderr
