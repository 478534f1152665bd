"""Sweeps: the matrix, the plans, the executors (local processes, a real local Ray cluster, submitit), merge."""

from __future__ import annotations

import re
import sys
from dataclasses import replace

import orjson
import pytest

from inspector.cli import build_parser, main, study_request
from inspector.request import StudyRequest
from inspector.sweep.executors import ExecutorOptions, run_ray, run_slurm
from inspector.sweep.jobs import Job, SweepFolder, plan_key
from inspector.sweep.matrix import combinations, parse_matrix
from inspector.sweep.runner import merge_finished, run_jobs
from sessions.analyses.comparison import baseline_for
from sessions.documents import storage
from sessions.documents.errors import InputError, MissingEnvironment
from sessions.documents.options import BY_KEY
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants
from tests.conftest import ROOT, run_cli, run_cli_process

MATRIX = {
    "base": {"device": "cpu", "variants": "fp32,fp8", "fp8-recipe": "all", "rounds": 2, "warmup": 0},
    "axes": {"model": ["test_resnet", "test_efficientnet"], "batch": [1, 2], "opt-level": [3, 1]},
    "exclude": [{"model": "test_efficientnet", "opt-level": 1}],
}


def test_the_matrix_is_the_product_of_its_axes_less_the_exclusions():
    found = combinations(parse_matrix(MATRIX, "m", "m.toml"), "m.toml")
    assert len(found) == 2 * 2 * 2 - 2
    assert {"model": "test_efficientnet", "batch": "1", "opt-level": "3"} in [c.axes for c in found]
    assert all(not (c.axes["model"] == "test_efficientnet" and c.axes["opt-level"] == "1") for c in found)
    first = found[0].request
    assert (first.model, first.batch, first.opt_level, first.fp8_recipes, first.warmup_s) == (
        "test_resnet", 1, 3, ("all",), 0.0)


@pytest.mark.parametrize("change, message", [
    ({"axes": {"model": ["a"], "batchsize": [1]}}, "unknown option 'batchsize'"),
    ({"base": {"model": "a", "batch": 1}, "axes": {"batch": [2]}}, "batch is both in [base] and in [axes]"),
    ({"axes": {"model": ["a"]}, "exclude": [{"batch": 2}]}, "exclude names 'batch', which is not an axis"),
    ({"axes": {"batch": [1]}}, "no model"),
    ({"axes": {"model": ["a"], "batch": []}}, "axes.batch must be a non-empty list"),
    ({"axes": {"model": ["a"], "batch": ["one"]}}, "axes.batch: --batch: expected a whole number, not 'one'"),
    ({"axes": {"model": ["a"], "batch": [0]}}, "--batch must be between 1 and 65536, not 0"),
    ({"axes": {"model": ["a"]}, "exclude": [{"model": "a"}]}, "every combination is excluded"),
    ({"axis": {}}, "unknown table 'axis'"),
    # one option under two spellings: the label would name one value and the job run the other
    ({"axes": {"model": ["a"], "calib-count": [4], "calib_count": [8]}},
     "'calib-count' and 'calib_count' are one option"),
    ({"axes": {"model": ["a"], "fp8-recipe": ["all"], "fp8-layout": ["all-per-tensor"]}},
     "'fp8-recipe' and 'fp8-layout' are one option (--fp8-recipe)"),
    ({"base": {"model": "a", "calib_count": 4}, "axes": {"calib-count": [8]}},
     "'calib_count' and 'calib-count' are one"),
    # ranges at plan time: the dry run fails, not the job
    ({"axes": {"model": ["a"], "seed": [-1]}}, "axes.seed: --seed must be between 0 and 4294967295, not -1"),
    ({"base": {"model": "a", "rounds": 10**9}}, "base.rounds: --rounds must be between 1 and 100000"),
    ({"base": {"model": "a", "iters": 0}}, "--iters must be between 1 and 10000000, not 0"),
    ({"base": {"model": "a", "warmup": 1e308}}, "--warmup must be between 0 and 3600 seconds"),
    ({"base": {"model": "a", "tracer": "nope"}}, "unknown tracer 'nope'"),
    ({"base": {"model": ""}}, "model must not be empty"),
    ({"axes": {"model": ["a", ""]}}, "model must not be empty"),
    # exclusions that could exclude nothing, or everything
    ({"axes": {"model": ["a"], "batch": [1, 2]}, "exclude": [{"batch": "2"}]}, "exclude batch = '2' is not one of"),
    ({"axes": {"model": ["a"], "batch": [1, 2]}, "exclude": [{"batch": 3}]}, "exclude batch = 3 is not one of"),
    ({"axes": {"model": ["a"], "batch": [1, 2]}, "exclude": [{}]}, "[[exclude]] number 1 is empty"),
    # the sweep's folder name
    ({"sweep": {"name": "."}, "axes": {"model": ["a"]}}, "[sweep] name '.' is not a folder name"),
    ({"sweep": {"name": ["a", "b"]}, "axes": {"model": ["a"]}}, "[sweep] name must be a string"),
    ({"sweep": {"name": "a/b"}, "axes": {"model": ["a"]}}, "is a path, not a name"),
])
def test_a_bad_matrix_is_one_line(change, message):
    with pytest.raises(InputError, match=re.escape(message)):
        combinations(parse_matrix(change, "m", "m.toml"), "m.toml")


def test_each_job_records_the_run_command_that_asks_for_the_same_request():
    for combination in combinations(parse_matrix(MATRIX, "m", "m.toml"), "m.toml"):
        argv = combination.request.run_argv()
        args = build_parser().parse_args(argv[1:])
        assert study_request(args, []) == combination.request


def fake_plan(model: str, batch: int, backend: str = "fake") -> StudyPlan:
    return StudyPlan(model=model, backend=backend, device="cpu", variants=parse_variants("fp16,fp8", ["all"], []),
                     batch=batch, timing=TimingPlan(0.0, 2, 2), tracer="fake")


def fake_jobs(folder: SweepFolder, killed: bool = False) -> list[Job]:
    plans = [({"model": m, "batch": str(b)}, fake_plan(m, b)) for m in ("fake-a", "fake-b") for b in (1, 2)]
    if killed:
        plans.append(({"model": "fake-c", "batch": "1"}, fake_plan("fake-c", 1, backend="fake-killed-once")))
    jobs = []
    for axes, plan in plans:
        key = plan_key(plan)
        jobs.append(Job(key, axes, replace(plan, out=str(folder.session(key))), ("trt-inspect", "run", plan.model),
                        ("tests.fake_backend", "tests.sweep_fakes")))
    return jobs


def test_the_plan_key_is_what_the_plan_measures():
    plan = fake_plan("fake-a", 1)
    assert plan_key(plan) == plan_key(replace(plan, out="/elsewhere.json", raw_trace="/raw"))
    assert plan_key(plan) != plan_key(replace(plan, batch=2))


def outcomes_of(folder: SweepFolder, jobs: list[Job], executor: str, options: ExecutorOptions | None = None):
    lines: list[str] = []
    outcomes, interrupted = run_jobs(folder, jobs, executor, options or ExecutorOptions(), lines.append)
    assert not interrupted
    return {job.plan.model + "/" + job.axes["batch"]: outcomes[job.key] for job in jobs}, lines


def test_local_jobs_run_in_processes_a_killed_one_is_reported_and_a_rerun_skips_finished(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    folder = SweepFolder(tmp_path / "sweep")
    jobs = fake_jobs(folder, killed=True)
    first, _ = outcomes_of(folder, jobs, "local")
    assert {name: o.state for name, o in first.items()} == {
        "fake-a/1": "done", "fake-a/2": "done", "fake-b/1": "done", "fake-b/2": "done", "fake-c/1": "failed"}
    assert first["fake-c/1"].error.startswith("killed by SIGKILL; log: ")
    again, lines = outcomes_of(folder, jobs, "local")
    assert "5 jobs: 4 finished earlier (skipped), 1 to run (local)" in lines
    assert {o.state for name, o in again.items() if name != "fake-c/1"} == {"skipped"}
    assert again["fake-c/1"].state == "done"  # killed once only
    merged = storage.load(merge_finished(folder, jobs, ["trt-inspect", "sweep", "m.toml"]))
    assert merged.merge.axes == ["model", "backend", "batch", "variant"]  # what differs between the jobs
    assert "fake-a fake b2/fp8-all" in [v.name for v in merged.variants]
    fp16 = merged.variant("fake-c fake-killed-once b1/fp16")
    assert fp16.axes == {"model": "fake-c", "backend": "fake-killed-once", "batch": "1", "variant": "fp16"}
    assert baseline_for(merged, merged.variant("fake-c fake-killed-once b1/fp8-all")) is fp16


@pytest.mark.integration
def test_submitit_local_executor_runs_every_job(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.chdir(ROOT)
    folder = SweepFolder(tmp_path / "sweep")
    jobs = fake_jobs(folder)[:2]
    outcomes, _ = outcomes_of(folder, jobs, "slurm", ExecutorOptions(submitit_cluster="local", time_limit_min=5))
    assert {o.state for o in outcomes.values()} == {"done"} and all(o.job_id for o in outcomes.values())
    assert all(folder.session(job.key).is_file() for job in jobs)


@pytest.mark.slow
@pytest.mark.integration
def test_a_real_local_ray_cluster_runs_every_job(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.chdir(ROOT)
    folder = SweepFolder(tmp_path / "sweep")
    jobs = fake_jobs(folder, killed=True)
    outcomes, _ = outcomes_of(folder, jobs, "ray")
    assert [o.state for o in outcomes.values()].count("done") == 4
    assert outcomes["fake-c/1"].state == "failed" and "killed by SIGKILL" in outcomes["fake-c/1"].error


@pytest.mark.parametrize("executor, module", [(run_ray, "ray"), (run_slurm, "submitit")])
def test_without_the_extra_the_executor_fails_with_one_line(tmp_path, monkeypatch, executor, module):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingEnvironment, match=r"needs .*pip install 'trt-inspect\[sweep\]'"):
        executor(SweepFolder(tmp_path), [], ExecutorOptions(), lambda job, outcome: None)


def test_the_cli_says_which_extra_is_missing_and_exits_3(tmp_path):
    matrix = tmp_path / "m.toml"
    matrix.write_text('[base]\ndevice = "cpu"\n[axes]\nmodel = ["test_resnet"]\n')
    code = "import sys; sys.modules['ray'] = None; from inspector.cli import main; sys.exit(main(sys.argv[1:]))"
    import subprocess

    result = subprocess.run([sys.executable, "-c", code, "sweep", str(matrix), "--executor", "ray",
                             "--out", str(tmp_path / "s")],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 3
    assert result.stderr.strip().splitlines()[-1] == (
        "trt-inspect: error: --executor ray needs ray: pip install 'trt-inspect[sweep]'")


@pytest.mark.slow
def test_dry_run_prints_the_plans_and_the_job_count(tmp_path):
    result = run_cli("sweep", str(ROOT / "studies" / "example-cpu.toml"), "--dry-run", "--out", str(tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    assert "4 jobs, 0 finished earlier" in result.stdout
    assert result.stdout.count("fp32,fp8-all") == 4 and not (tmp_path / "s").exists()


LIGHT = """[base]
device = "cpu"
variants = "fp32"
rounds = 1
iters = 2
warmup = 0
tracer = "torch"
[axes]
model = ["test_resnet", "test_efficientnet"]
batch = [1, 2]
"""


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.integration),
                                      pytest.param("slurm", marks=pytest.mark.integration)])
def test_a_2x2_matrix_of_tiny_timm_models_runs_and_merges(tmp_path, executor):
    """local: the example matrix (fp32 and FP8), then its rerun; Ray and submitit: the same models, fp32 only."""
    if executor != "local":
        pytest.importorskip({"ray": "ray", "slurm": "submitit"}[executor])
    matrix = ROOT / "studies" / "example-cpu.toml"
    if executor != "local":
        matrix = tmp_path / "light.toml"
        matrix.write_text(LIGHT)
    out = tmp_path / "sweep"
    extra = ["--submitit-cluster", "local"] if executor == "slurm" else []
    result = run_cli_process("sweep", str(matrix), "--executor", executor, "--out", str(out), *extra)
    assert result.returncode == 0, result.stderr[-2000:]
    merged = storage.load(out / "merged.json")
    assert merged.merge.axes == ["model", "batch", "variant"] and len(merged.merge.jobs) == 4
    assert {v.axes["variant"] for v in merged.variants} == ({"fp32", "fp8-all"} if executor == "local" else {"fp32"})
    assert all(v.latency is not None and v.trace.per_call > 0 for v in merged.variants)
    if executor == "local":
        again = run_cli_process("sweep", str(matrix), "--executor", executor, "--out", str(out))
        assert "4 jobs: 4 finished earlier (skipped), 0 to run" in again.stderr
    if executor == "slurm":  # resolved where each job ran: the job files hold requests, the sessions the plans
        jobs = [orjson.loads(path.read_bytes()) for path in (out / "jobs").glob("*.json")]
        assert len(jobs) == 4 and all(job["plan"] is None and job["request"]["device"] == "cpu" for job in jobs)
        plans = [storage.load(path).study.plan for path in (out / "sessions").glob("*.json")]
        assert len(plans) == 4 and all(plan.backend == "torch" and plan.device == "cpu" for plan in plans)


def test_a_submitting_machine_without_a_gpu_leaves_cuda_plans_to_the_jobs(tmp_path):
    """A Slurm login node has no GPU: resolved there, a CUDA matrix would fail (or, with device auto, run on
    CPUs); each job resolves its own plan on the GPU node instead."""
    matrix = tmp_path / "m.toml"
    matrix.write_text('[base]\ndevice = "cuda"\nvariants = "fp16,fp8"\n'
                      '[axes]\nmodel = ["test_resnet"]\nbatch = [1, 2]\n')
    out = str(tmp_path / "s")
    result = run_cli("sweep", str(matrix), "--executor", "slurm", "--dry-run", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "2 jobs, 0 finished earlier" in result.stdout and "(on the job's machine)" in result.stdout
    assert "each job resolves its plan" in result.stderr
    here = run_cli("sweep", str(matrix), "--executor", "slurm", "--resolve", "here", "--dry-run", "--out", out)
    assert here.returncode == 3 and "no CUDA GPU is visible" in here.stderr
    bad = matrix.read_text().replace("fp16,fp8", "fp16,fp9")
    matrix.write_text(bad)
    refused = run_cli("sweep", str(matrix), "--executor", "slurm", "--dry-run", "--out", out)
    assert refused.returncode == 2 and "fp9" in refused.stderr  # what needs no machine is still checked here


def test_main_refuses_gpus_below_one(tmp_path, capsys):
    assert main(["sweep", "m.toml", "--gpus", "0"]) == 2
    assert "--gpus must be at least 1" in capsys.readouterr().err


def test_every_study_option_can_be_a_matrix_key():
    assert set(StudyRequest.__dataclass_fields__) - {"command", "out", "raw_trace"} == {
        s.field for s in BY_KEY.values()}


class FakeNvml:
    @staticmethod
    def nvmlDeviceGetHandleByIndex(index):
        return ("index", index)

    @staticmethod
    def nvmlDeviceGetHandleByUUID(uuid):
        return ("uuid", uuid)


@pytest.mark.parametrize("visible, handle", [(None, ("index", 0)), ("1", ("index", 1)), ("3,2", ("index", 3)),
                                             ("GPU-5e1f", ("uuid", "GPU-5e1f"))])
def test_each_job_records_the_gpu_it_ran_on(monkeypatch, visible, handle):
    from profilers.environment import _nvml_handle

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _nvml_handle(FakeNvml, 0) == handle
