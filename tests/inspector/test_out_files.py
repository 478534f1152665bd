"""Where a command writes and what it prints: the probe's `--out` through the one writer, checked before
any work; default names never shared; empty names refused; an export never over its own session; `--out` checked
before the set-up; an unreadable sessions folder said; every printed line escaped; CSV on stdout as in a file;
a latency no clock can measure refused on load."""

from __future__ import annotations

import ast
import csv
import datetime as dt
import io
import os
import re
import types
from pathlib import Path

import orjson
import pytest

from inspector.probe import fp8_probe
from sessions.documents import document, storage
from sessions.documents.errors import InputError
from sessions.documents.paths import session_file
from tests.conftest import DATA, H200, ROOT, run_cli

PROBE_SESSION = H200 / "segformer-b0-probe-b1.json"
STUDY = H200 / "senet154-h200.json"
LAYERS = DATA / "fuzz" / "trt10.layers.json"
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
FROZEN = dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.UTC)


def one_error_line(result, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def frozen_clock() -> types.SimpleNamespace:
    """A `datetime` module whose clock stands at FROZEN: two commands started in one second."""

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FROZEN if tz is not None else FROZEN.replace(tzinfo=None)

    return types.SimpleNamespace(datetime=Frozen, UTC=dt.UTC)


@pytest.fixture
def no_probe_work(monkeypatch):
    """Every step of the probe's work fails the test: the tracer, the GPU check, the model."""
    import builders.study_inputs
    import profilers.tracers

    def work(*_args, **_kwargs):
        pytest.fail("the probe started its work")

    monkeypatch.setattr(profilers.tracers, "get_tracer", work)
    monkeypatch.setattr(builders.study_inputs, "load_inputs", work)
    monkeypatch.setattr(fp8_probe, "require_fp8_environment", work, raising=False)


@pytest.fixture
def stub_measurement(monkeypatch):
    """The probe's GPU steps replaced by a saved probe session (its `created` the probe's); returns what it saw."""
    seen: list[dict] = []

    def measured(options, command, report, created):
        path = Path(options.out) if options.out else None
        if path is not None:  # the lock is held while the probe measures
            with pytest.raises(InputError, match="being written by another"), storage.session_lock(path):
                pass
        seen.append({"created": created})
        session = storage.load(PROBE_SESSION)
        session.study.created = created.isoformat(timespec="seconds")
        session.study.command = list(command)
        return session

    monkeypatch.setattr(fp8_probe, "_probe_session", measured)
    return seen


def test_probe_out_is_checked_before_any_work(tmp_path, no_probe_work):
    """H1: a saved study at --out, a folder, a held lock: refused with one line before the GPU is touched."""
    study = tmp_path / "s.json"
    study.write_bytes(STUDY.read_bytes())
    assert "exists; pass --force to replace it" in one_error_line(run_cli("probe", "resnet18", "--out", str(study)))
    assert study.read_bytes() == STUDY.read_bytes()
    assert "is a folder" in one_error_line(run_cli("probe", "resnet18", "--out", str(tmp_path)))
    with storage.session_lock(study):
        line = one_error_line(run_cli("probe", "resnet18", "--out", str(study), "--force"))
    assert "being written by another trt-inspect command" in line and study.read_bytes() == STUDY.read_bytes()


def test_probe_replaces_a_session_only_with_force_and_holds_its_lock(tmp_path, stub_measurement):
    """H1: --force replaces the study at --out, with the lock held while the probe measures."""
    study = tmp_path / "s.json"
    study.write_bytes(STUDY.read_bytes())
    result = run_cli("probe", "resnet18", "--out", str(study), "--force")
    assert result.returncode == 0, result.stderr
    assert storage.load(study).study.backend == "probe" and len(stub_measurement) == 1


def test_two_probes_in_one_second_get_two_default_names(monkeypatch, stub_measurement, isolated_home):
    """H1 / M8: the default name is never shared, never replaced, and --force is never advised for it."""
    monkeypatch.setattr(fp8_probe, "dt", frozen_clock())
    results = [run_cli("probe", "resnet18") for _ in range(2)]
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    names = sorted(p.name for p in (isolated_home / "sessions").glob("*.json"))
    assert names == ["resnet18-probe-b1-20260102-030405-2.json", "resnet18-probe-b1-20260102-030405.json"]
    assert not any("--force" in r.stderr + r.stdout for r in results)


def test_two_imports_in_one_second_get_two_default_names(monkeypatch, isolated_home):
    """M8: `import` without --out, twice in one second: two sessions, no advice to pass --force."""
    monkeypatch.setattr(document, "dt", frozen_clock())
    results = [run_cli("import", "--layers", str(LAYERS), "--name", "v") for _ in range(2)]
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    saved = sorted((isolated_home / "sessions").glob("*.json"))
    assert len(saved) == 2 and all(storage.load(p).variants[0].name == "v" for p in saved)
    assert not any("--force" in r.stderr for r in results)


def test_a_default_name_being_written_is_never_shared(isolated_home):
    """M8: while one command writes a default name, another started in the same second takes the next one."""
    first_name = session_file(None, "m", FROZEN, "import")
    with storage.session_writer(first_name, False) as first, \
            storage.session_writer(session_file(None, "m", FROZEN, "import"), False) as second:
        assert second.path == first.path.with_name(f"{first.path.stem}-2.json")
        first.finish(storage.load(PROBE_SESSION))
        second.finish(storage.load(PROBE_SESSION))
    with storage.session_writer(session_file(None, "m", FROZEN, "import"), False) as third:
        assert third.path.name == f"{first.path.stem}-3.json" and not third.replacing


@pytest.mark.parametrize("argv", [
    ["import", "--layers", str(LAYERS), "--out", ""],
    ["export", str(STUDY), "-o", ""],
    ["export", str(STUDY), "-o", "", "--force"],
    ["merge", str(STUDY), "--out", ""],
    ["run", "resnet18", "--device", "cpu", "--out", ""],
    ["probe", "resnet18", "--out", ""],
])
def test_an_empty_file_name_is_refused(argv, isolated_home, monkeypatch, tmp_path):
    """L4: an empty --out / -o is one line and exit 2, never taken for one not given; nothing is written."""
    monkeypatch.chdir(tmp_path)
    result = run_cli(*argv)
    assert result.returncode == 2 and result.stdout == "", (result.stdout[:200], result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (isolated_home / "sessions").exists() or not any((isolated_home / "sessions").glob("*.json"))


def test_an_export_never_replaces_the_session_it_reads(tmp_path, monkeypatch):
    """L5: `export S -o S --force`, by its own name, another spelling or a hard link: refused, S kept."""
    session = tmp_path / "s.json"
    session.write_bytes(STUDY.read_bytes())
    os.link(session, tmp_path / "hard.json")
    monkeypatch.chdir(tmp_path)
    for target in (str(session), "./s.json", "hard.json"):
        line = one_error_line(run_cli("export", str(session), "-o", target, "--force"))
        assert "is the session being exported" in line
    assert session.read_bytes() == STUDY.read_bytes()


@pytest.mark.parametrize("kind", ["folder", "fifo", "link", "existing", "locked"])
def test_run_checks_out_before_the_set_up(tmp_path, monkeypatch, kind):
    """L6: `run MODEL --out X` with X unusable is refused before the request is resolved or a model loads."""
    import builders.study_inputs
    import inspector.study

    def set_up(*_args, **_kwargs):
        pytest.fail("the set-up began")

    monkeypatch.setattr(inspector.study, "resolve", set_up)
    monkeypatch.setattr(builders.study_inputs, "load_inputs", set_up)
    target = tmp_path / "s.json"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "link":
        (tmp_path / "real.json").write_bytes(STUDY.read_bytes())
        target.symlink_to(tmp_path / "real.json")
    else:
        target.write_bytes(STUDY.read_bytes())
    argv = ("run", "resnet18", "--device", "cpu", "--out", str(target))
    if kind == "locked":
        with storage.session_lock(target):
            line = one_error_line(run_cli(*argv, "--force"))
    else:
        line = one_error_line(run_cli(*argv))
    assert str(target) in line


def test_sessions_says_a_folder_it_cannot_read(isolated_home, monkeypatch):
    """L7: a sessions folder that cannot be listed, or a file in its place, is one line and exit 2, never
    "no sessions"."""
    folder = isolated_home / "sessions"
    folder.mkdir(parents=True)
    (folder / "a.json").write_bytes(STUDY.read_bytes())
    real_scandir = os.scandir

    def no_permission(path="."):
        if Path(path) == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", no_permission)
    line = one_error_line(run_cli("sessions"))
    assert "cannot read the sessions folder" in line and "Permission denied" in line
    monkeypatch.setattr(os, "scandir", real_scandir)
    (folder / "a.json").unlink()
    folder.rmdir()
    folder.write_text("a file")
    assert "is not a folder" in one_error_line(run_cli("sessions"))


HOSTILE_NAME = "\x1b[2A\r\x1b[2K<fake row>\x07\x08\x00\x7f\x9b\u200b"


def test_show_layers_escapes_every_line(tmp_path):
    """H7: a variant named to move the cursor and overwrite a row: `show --layers` prints it escaped."""
    session = storage.load(STUDY)
    session.variants[0].name = HOSTILE_NAME
    path = tmp_path / "hostile.json"
    storage.save(session, path)
    result = run_cli("show", str(path), "--layers")
    assert result.returncode == 0, result.stderr
    assert not UNSAFE.search(result.stdout), UNSAFE.findall(result.stdout)
    assert "\\x1b[2A\\x0d\\x1b[2K<fake row>" in result.stdout and "\\u200b" in result.stdout


ESCAPERS = {"terminal_text", "table_text", "render_text"}  # sessions.reports.tables: each escapes what it prints


def unescaped_prints(source: str) -> list[int]:
    """Lines of `source` that print something to stdout not passed through an escaper first."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"):
            continue
        to_stderr = any(k.arg == "file" for k in node.keywords)
        escaped = all(isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in ESCAPERS
                      for a in node.args)
        if not escaped and not to_stderr:
            lines.append(node.lineno)
    return lines


def test_the_print_check_finds_a_raw_print():
    assert unescaped_prints("print(table.title)\nprint(terminal_text(x))\nprint()\nprint(f'{p}')\n") == [1, 4]


def test_every_line_a_command_prints_is_escaped():
    """H7: every `print` of a command passes what it prints through `terminal_text` (or a table renderer that
    calls it); stderr goes through `err`, which does."""
    found = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "inspector" / "commands").glob("*.py"))
             if (lines := unescaped_prints(p.read_text()))}
    assert found == {}


def test_csv_on_stdout_is_the_file_byte_for_byte(tmp_path):
    """M1: `export --format csv > a.csv` holds what `-o b.csv` holds: rows end in \\r\\n, no `\\x0d` text."""
    session = storage.load(STUDY)
    session.variants[0].name = "a\rb"  # a cell's own \r: escaped in both
    path = tmp_path / "s.json"
    storage.save(session, path)
    for extra in ([], ["--sections", "layers"]):
        target = tmp_path / f"b{len(extra)}.csv"
        written = run_cli("export", str(path), "--format", "csv", *extra, "-o", str(target))
        shown = run_cli("export", str(path), "--format", "csv", *extra)
        assert written.returncode == shown.returncode == 0, written.stderr + shown.stderr
        on_disk = target.read_bytes().decode()
        assert shown.stdout == on_disk
        rows = list(csv.reader(io.StringIO(shown.stdout, newline="")))
        assert len(rows) > 1 and not any(cell.endswith("\\x0d") for row in rows for cell in row)
        assert on_disk.count("\r\n") == len(rows)


@pytest.mark.parametrize("median", [5e-324, 1e-300, -1.0, 1e300])
@pytest.mark.parametrize("command", [["show"], ["export"], ["export", "--format", "csv"], ["groups"]])
def test_a_latency_no_clock_measures_is_refused_on_load(tmp_path, median, command):
    """M7: a latency below a nanosecond, negative or absurdly long: one line naming the field, exit 2."""
    doc = orjson.loads(STUDY.read_bytes())
    doc["variants"][0]["latency"]["median_ms"] = median
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps(doc))
    line = one_error_line(run_cli(command[0], str(path), *command[1:]))
    assert "variants[0].latency.median_ms" in line


def test_the_shortest_latency_a_clock_measures_still_shows(tmp_path):
    """M7: a nanosecond is a time the views divide by without overflow."""
    doc = orjson.loads(STUDY.read_bytes())
    for name in ("samples_ms",):
        doc["variants"][0]["latency"][name] = [1e-6] * len(doc["variants"][0]["latency"][name])
    for name in ("min_ms", "median_ms", "mean_ms", "p90_ms", "p99_ms", "max_ms"):
        doc["variants"][0]["latency"][name] = 1e-6
    doc["variants"][0]["latency"]["std_ms"] = 1e-22
    path = tmp_path / "s.json"
    path.write_bytes(orjson.dumps(doc))
    for command in (["show"], ["export"], ["export", "--format", "csv"]):
        result = run_cli(command[0], str(path), *command[1:])
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def test_two_runs_in_one_second_get_two_default_names(monkeypatch, isolated_home, tmp_path):
    """M8: `run` without --out, twice in one second: the second takes `-2`, never refused or told to --force."""
    import inspector.study
    from tests.inspector.test_study_fake import fake_plan

    monkeypatch.setattr(inspector.study, "dt", frozen_clock())
    paths = [inspector.study.run_study(fake_plan(tmp_path, out=None), [], lambda p: None)[1] for _ in range(2)]
    assert [p.name for p in paths] == ["fake-model-20260102-030405.json", "fake-model-20260102-030405-2.json"]
    assert all(storage.load(p).variants for p in paths)


def test_export_refuses_a_target_another_command_is_writing(tmp_path):
    """One writer: `export -o X` while another command writes X is refused, X untouched."""
    target = tmp_path / "x.md"
    target.write_text("old")
    with storage.file_lock(storage.lock_path_of(target), "busy"):
        line = one_error_line(run_cli("export", str(STUDY), "-o", str(target), "--force"))
    assert "being written by another trt-inspect command" in line and target.read_text() == "old"


def test_sweep_state_files_are_never_written_through_a_link(tmp_path):
    """One writer: a link planted where a sweep writes a job's plan or status is refused, its target untouched."""
    from inspector.sweep.jobs import Job, Outcome, SweepFolder

    folder = SweepFolder(tmp_path / "sweep")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("mine")
    for path in (folder.job_file("k"), folder.status("k")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        folder.write_job(Job("k", {}, None, ("trt-inspect",)))
    with pytest.raises(InputError, match="symbolic link"):
        folder.write_status(Outcome("k", "done"))
    assert elsewhere.read_text() == "mine"


def test_the_tui_study_checks_out_before_its_screen_opens(tmp_path, monkeypatch):
    """L6: `trt-inspect MODEL --out FOLDER` on a terminal is refused with one line before the TUI and the set-up."""
    import inspector.cli
    import inspector.tui

    monkeypatch.setattr(inspector.cli, "interactive", lambda: True)
    monkeypatch.setattr(inspector.tui, "open_tui", lambda **_kwargs: pytest.fail("the TUI opened"))
    assert "is a folder" in one_error_line(run_cli("resnet18", "--device", "cpu", "--out", str(tmp_path)))


def test_import_out_is_checked_before_any_file_is_read(tmp_path, monkeypatch):
    """A saved session at `import --out`, or a folder there: one line before the files are read (a 100 MB log takes
    seconds); the session is left as it was."""
    from profilers.trt_import import importer

    def never(*args, **kwargs):
        raise AssertionError("the files were read before --out was checked")

    monkeypatch.setattr(importer, "import_variant", never)
    study = tmp_path / "s.json"
    study.write_bytes(STUDY.read_bytes())
    assert "exists; pass --force to replace it" in one_error_line(
        run_cli("import", "--layers", str(LAYERS), "--out", str(study)))
    assert "is a folder" in one_error_line(run_cli("import", "--layers", str(LAYERS), "--out", str(tmp_path)))
    assert study.read_bytes() == STUDY.read_bytes()
