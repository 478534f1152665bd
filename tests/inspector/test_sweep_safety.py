"""A sweep runs only the tool's own code (never modules from the working folder; plug-ins only with
--allow-imports), plans a bounded matrix with progress and one model structure per model, and owns its folder."""

from __future__ import annotations

from builders.models import structure as model_structure
from builders.recipes import fp8 as fp8_recipes
from inspector.cli import main
from inspector.sweep import runner
from inspector.sweep.jobs import SweepFolder
from inspector.sweep.matrix import parse_matrix
from tests.inspector.test_sweep import fake_jobs, outcomes_of

EVIL = "import pathlib; pathlib.Path({marker!r}).write_text('imported from the working folder')\n"


def test_jobs_never_import_modules_from_the_working_folder(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "PWNED"
    for name in ("profilers", "sessions", "builders", "inspector", "tests"):
        (work / f"{name}.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.chdir(work)
    folder = SweepFolder(tmp_path / "sweep")
    outcomes, _ = outcomes_of(folder, fake_jobs(folder)[:1], "local")
    assert [o.state for o in outcomes.values()] == ["done"], [o.error for o in outcomes.values()]
    assert not marker.exists()


def write_matrix(tmp_path, text: str):
    path = tmp_path / "m.toml"
    path.write_text(text)
    return str(path)


def test_matrix_imports_need_the_command_line_opt_in(tmp_path, capsys):
    matrix = write_matrix(tmp_path, '[sweep]\nimports = ["evil_plugin"]\n[base]\ndevice = "cpu"\nvariants = "fp32"\n'
                                    '[axes]\nmodel = ["test_resnet"]\n')
    assert main(["sweep", matrix, "--dry-run", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "[sweep] imports evil_plugin would run that code in every job; pass --allow-imports" in err
    assert main(["sweep", matrix, "--dry-run", "--allow-imports", "--out", str(tmp_path / "s")]) == 0


def test_a_matrix_too_big_to_plan_is_refused_at_once(tmp_path, capsys):
    axes = "\n".join(f"{name} = [{', '.join(str(i + 1) for i in range(10))}]"
                     for name in ("batch", "rounds", "iters", "seed", "calib-count", "eval-count", "trace-calls",
                                  "switch-warmup", "threads", "warmup"))  # each value in its range
    matrix = write_matrix(tmp_path, f'[base]\nmodel = "test_resnet"\ndevice = "cpu"\n[axes]\n{axes}\n')
    assert main(["sweep", matrix, "--dry-run", "--out", str(tmp_path / "s")]) == 2
    assert "the axes make 10,000,000,000 combinations, over the 10,000 a sweep plans" in capsys.readouterr().err


def test_planning_builds_each_model_structure_once_and_reports_progress(tmp_path, monkeypatch):
    built: list[str] = []
    real = model_structure.model_structure

    def counted(module, example):
        built.append(type(module).__name__)
        return real(module, example)

    fp8_recipes._structure_of.cache_clear()
    monkeypatch.setattr(model_structure, "model_structure", counted)
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.0)
    matrix = parse_matrix({"base": {"model": "test_resnet", "device": "cpu", "variants": "fp32,fp8"},
                           "axes": {"seed": list(range(12))}}, "m", "m.toml")
    lines: list[str] = []
    jobs = runner.plan_jobs(matrix, "m.toml", SweepFolder(tmp_path / "s"), lines.append)
    assert len(jobs) == 12 and len(built) == 1
    assert "planned 11 of 12 combinations" in lines


def test_a_second_sweep_into_a_folder_in_use_is_refused(tmp_path, capsys):
    matrix = write_matrix(tmp_path, '[base]\ndevice = "cpu"\nvariants = "fp32"\n[axes]\nmodel = ["test_resnet"]\n')
    folder = SweepFolder(tmp_path / "s")
    with folder.lock():
        assert main(["sweep", matrix, "--out", str(folder.root)]) == 2
    assert "is in use by another trt-inspect sweep" in capsys.readouterr().err
    assert not (folder.root / "jobs").exists()

