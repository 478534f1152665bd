"""The study section (`export --format study`) and merged sessions, from the real H200 sessions."""

from __future__ import annotations

import copy

import pytest

from sessions.analyses.groups import load_rules
from sessions.analyses.merge import merge_sessions, split_merged
from sessions.analyses.summary import summarize_session
from sessions.documents import storage
from sessions.documents.errors import InspectError
from sessions.reports.export import export_markdown
from sessions.reports.matrix_tables import matrix_markdown
from sessions.reports.study_export import decision, study_markdown
from sessions.reports.tables import markdown_table_problems
from tests.conftest import H200, run_cli

B1, B8 = H200 / "senet154-h200.json", H200 / "senet154-h200-b8.json"
SECTIONS = ["### Summary and decision", "### Recipe", "### Method", "### Results", "### Quality",
            "### Kernels per call by group", "### Layers of the FP8 engine that did not run in FP8", "### Not measured",
            "### When to revisit", "### Reproduce"]


@pytest.fixture(scope="module")
def sources():
    return [(str(B1), storage.load(B1)), (str(B8), storage.load(B8))]


def as_tensorrt(session, batch: int, fp16_ms: float, fp8_ms: float):
    """The H200 session retold as a TensorRT job with the given medians (to exercise the decision only)."""
    changed = copy.deepcopy(session)
    changed.study.backend, changed.study.batch = "tensorrt", batch
    changed.environment.versions["tensorrt"] = "10.16"
    changed.variants = [v for v in changed.variants if v.name in ("fp16", "fp8-no-se")]
    for variant, ms in zip(changed.variants, (fp16_ms, fp8_ms), strict=False):
        variant.simulated, variant.backend = False, "tensorrt"
        lat, factor = variant.latency, ms / variant.latency.median_ms
        lat.samples_ms = [s * factor for s in lat.samples_ms]
        lat.round_medians_ms = [m * factor for m in lat.round_medians_ms]
        lat.median_ms = ms
    return changed


def test_the_section_has_the_studies_shape_and_well_formed_tables(sources):
    text = study_markdown(sources, load_rules())
    assert [line for line in text.splitlines() if line.startswith("### ")] == SECTIONS
    assert markdown_table_problems(text) == []
    assert "**No speed decision: every FP8 variant here is simulated FP8" in text
    assert "| H200 | PyTorch 2.11.0 | - | 8 | fp8-no-se (simulated) | 7.849 | 12.566 | 0.62 |" in text
    assert "`layer1.0.conv2` 64 kernels (64 groups)" in text  # the layers that explain the count
    assert "- GPUs other than NVIDIA H200." in text and "batch sizes other than" not in text  # two batches given
    assert "trt-inspect rerun " + B8.name in text and str(B8.parent) not in text  # no machine's folder


def test_the_decision_is_computed_from_the_numbers(sources):
    base = sources[0][1]
    slower = [("a", as_tensorrt(base, 1, 10.0, 14.0)), ("b", as_tensorrt(base, 32, 10.0, 12.7))]
    text = study_markdown(slower, load_rules())
    assert "**FP8 does not pay: 0.71x to 0.79x of fp16.**" in text
    pays = [("a", as_tensorrt(base, 1, 10.0, 14.0)), ("b", as_tensorrt(base, 32, 10.0, 8.0))]
    assert "**FP8 pays at batch 32 (1.25x of fp16), not elsewhere (0.71x).**" in study_markdown(pays, load_rules())
    assert "- batch sizes other than 1." in study_markdown(slower[:1], load_rules())
    noisy = as_tensorrt(base, 32, 10.0, 9.0)  # 1.11x by the medians, but the two variants' samples overlap
    fp16, fp8 = noisy.variants
    fp16.latency.samples_ms = [10.0, 6.0, 14.0] * 10
    fp8.latency.samples_ms = [9.0, 5.0, 13.0] * 10
    assert "**FP8 does not pay: 1.11x of fp16.**" in study_markdown([("n", noisy)], load_rules())


def test_no_fp8_against_fp16_is_no_decision():
    assert decision([], []).startswith("No decision")


def test_a_merged_session_splits_back_into_its_jobs(sources, tmp_path):
    merged = merge_sessions(sources, ["trt-inspect", "merge"])
    storage.save(merged, tmp_path / "m.json")
    loaded = storage.load(tmp_path / "m.json")
    assert loaded.merge.axes == ["batch", "variant"]
    assert [v.name for v in loaded.variants] == ["b1/fp16", "b1/fp8-all", "b1/fp8-no-se", "b8/fp16", "b8/fp8-no-se"]
    assert loaded.merge.jobs[1].environment.gpu.name == "NVIDIA H200" and loaded.study.batch is None
    speedups = {s.name: s.speedup for s in summarize_session(loaded)}
    assert speedups["b8/fp8-no-se"] == pytest.approx(7.849 / 12.566, rel=1e-3)  # against its own job's fp16
    jobs = split_merged(loaded, "m.json")
    assert [s.study.batch for _, s in jobs] == [1, 8] and [v.name for v in jobs[1][1].variants] == ["fp16", "fp8-no-se"]
    body = study_markdown(sources, load_rules()).split("### Reproduce")[0]
    assert study_markdown([("m.json", loaded)], load_rules()).split("### Reproduce")[0] == body


def test_a_merged_session_renders_like_any_other_and_as_a_matrix(sources):
    merged = merge_sessions(sources, ["trt-inspect", "merge"])
    assert markdown_table_problems(export_markdown(merged, load_rules())) == []
    matrix = matrix_markdown(merged)
    assert markdown_table_problems(matrix) == []
    assert "### x by batch and variant" in matrix and "| b8 | - | 0.62 |" in matrix


def test_merging_the_same_session_twice_is_refused(sources):
    with pytest.raises(InspectError, match="the same session is given twice"):
        merge_sessions([sources[0], sources[0]], [])


def test_a_malformed_table_is_never_written(sources, monkeypatch):
    from sessions.reports import study_export

    real = study_export.render_markdown

    def broken(headers, rows, right=None):
        return real(headers, rows, right) + "\n| one cell |"

    monkeypatch.setattr(study_export, "render_markdown", broken)
    with pytest.raises(InspectError, match="malformed table"):
        study_markdown(sources, load_rules())


def test_the_cli_exports_the_study_of_several_sessions(tmp_path):
    result = run_cli("export", str(B1), str(B8), "--format", "study", "-o", str(tmp_path / "study.md"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "study.md").read_text().startswith("## FP8 quantization study: senet154")
    refused = run_cli("export", str(B1), str(B8), "--format", "md")
    assert refused.returncode == 2 and "takes one session" in refused.stderr


async def test_the_tui_opens_a_merged_session_like_any_other(sources, tmp_path):
    from inspector.tui.app import InspectorApp
    from inspector.tui.screens.overview import OverviewScreen
    from inspector.tui.screens.tables import GroupsScreen

    path = tmp_path / "merged.json"
    storage.save(merge_sessions(sources, ["trt-inspect", "merge"]), path)
    app = InspectorApp(session=storage.load(path), path=path)
    async with app.run_test(size=(120, 36)) as pilot:
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("g")
        assert isinstance(app.screen, GroupsScreen)


def test_the_quality_tables_count_the_stress_inputs_that_gave_nan_or_inf():
    session = storage.load(H200 / "senet154-study-b1.json")
    fp16 = session.variant("fp16").quality
    assert (fp16.stress_nonfinite, fp16.stress_inputs) == (1, 15)  # the +-65504 input overflows fp16
    rules = load_rules()
    study = study_markdown([("b1", session)], rules)
    assert "| fp16 | fp32 (PyTorch) | 18 | 100.0 | 8.25e-11 | 9.11e-05 | 0 | 1 of 15 |" in study
    assert "stress inputs with NaN / Inf: 1 to 1 of 15" in study
    assert "| fp32 | fp32 (PyTorch) | 18 | 100.0 | 0.0000 | 0.0000 | 0 | 0 of 15 |" in export_markdown(session, rules)
    assert not markdown_table_problems(study)


def cpu_run(session):
    """The H200 session retold as a CPU run: no fp16 variant (fp32 is the CPU's baseline), simulated FP8."""
    cpu = copy.deepcopy(session)
    cpu.study.device, cpu.environment.gpu = "cpu", None
    cpu.variants = [v for v in cpu.variants if v.name != "fp16"]
    for variant in cpu.variants:
        variant.device = "cpu"
    return cpu


def test_a_cpu_run_with_fp8_tells_the_truth():
    text = study_markdown([("cpu.json", cpu_run(storage.load(H200 / "senet154-mainjob-warm.json")))], load_rules())
    assert "No FP8 variant records a recipe" not in text
    assert "- **fp8-all** (simulated): fp8 e4m3" in text and "- **fp8-no-se** (simulated)" in text
    assert ("**No speed decision: FP8 ran (fp8-all (simulated), fp8-no-se (simulated)), but no fp16 variant was timed "
            "in the same job; on the CPU the baseline is fp32 or bf16") in text
    layers = text.split("Layers that explain the count:")[1].split("###")[0]
    assert "fp16" not in layers and "65 kernels (64 groups), fp32 1" in layers  # named: the run's real baseline


def test_when_to_revisit_is_read_from_the_sessions(sources):
    text = study_markdown(sources[:1], load_rules())
    revisit = text.split("### When to revisit")[1].split("###")[0]
    items = [line for line in revisit.splitlines() if line.startswith("- ")]
    assert items[0].startswith("- with real FP8 kernels") and "every FP8 variant here is simulated" in items[0]
    assert "one kernel instead of one per group (3 layers split here, e.g. `layer1.0.conv2`)" in items[1]
    assert items[2] == ("- when quantize / dequantize gets cheaper: it adds 4.98 ms per call to fp8-all (simulated) "
                        "against fp16 here.")
    assert items[3].startswith("- at larger batches or inputs") and "(only batch 1 measured)" in items[3]
    both = study_markdown(sources, load_rules()).split("### When to revisit")[1].split("###")[0]
    assert "at larger batches" not in both  # batch 1 and 8 were measured


def test_the_engine_each_backend_names_tells_jobs_apart_and_a_library_version_does_not(sources):
    """Two jobs alike but for the engine their backend named (its version in its words): merged, they are told apart
    by it, with no backend named in the merge's rule; jobs that differ only in a library's version (numpy) are not."""
    base = sources[0][1]
    jobs = []
    for version in ("91900", "92000"):
        job = copy.deepcopy(base)
        job.study.engine = f"cuDNN / cuBLASLt engine (cuDNN {version})"
        jobs.append((f"cudnn-{version}.json", job))
    merged = merge_sessions(jobs, ["trt-inspect", "merge"])
    assert [job.label for job in merged.merge.jobs] == ["cuDNN / cuBLASLt engine (cuDNN 91900)",
                                                        "cuDNN / cuBLASLt engine (cuDNN 92000)"]
    assert "x by engine:" in study_markdown(jobs, load_rules())
    numpy = [copy.deepcopy(base) for _ in range(2)]
    numpy[1].environment.versions["numpy"] = "0.0.1"
    labels = [job.label for job in merge_sessions([(f"{i}.json", s) for i, s in enumerate(numpy)],
                                                  ["trt-inspect", "merge"]).merge.jobs]
    assert not any("numpy" in label or "0.0.1" in label for label in labels)


def test_a_merged_session_keeps_the_gpu_state_its_jobs_share(sources):
    from sessions.documents.vocab import GPU_STATE_SETTLED

    jobs = [copy.deepcopy(sources[0][1]) for _ in range(2)]
    for job in jobs:
        job.environment.gpu_state = GPU_STATE_SETTLED
    merged = merge_sessions([(f"{i}.json", job) for i, job in enumerate(jobs)], ["trt-inspect", "merge"])
    assert merged.environment.gpu_state == GPU_STATE_SETTLED
    jobs[1].environment.gpu_state = None
    merged = merge_sessions([(f"{i}.json", job) for i, job in enumerate(jobs)], ["trt-inspect", "merge"])
    assert merged.environment.gpu_state is None  # a job without a record: the merge claims no state
    from sessions.documents.vocab import GPU_STATE_NOT_SETTLED

    jobs[1].environment.gpu_state = f"{GPU_STATE_NOT_SETTLED}the helper process failed (exit 7)"
    merged = merge_sessions([(f"{i}.json", job) for i, job in enumerate(jobs)], ["trt-inspect", "merge"])
    assert merged.environment.gpu_state == jobs[1].environment.gpu_state  # one job not settled: the merge says so


def _not_measured(sessions) -> list[str]:
    text = study_markdown([(f"{i}.json", s) for i, s in enumerate(sessions)], load_rules())
    section = text.split("### Not measured", 1)[1].split("###", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def test_what_was_not_measured_names_each_backends_one_engine_and_one_level(sources):
    """Per backend, an engine all its jobs ran is one whose other versions were not measured, whatever the backend
    (none named in the rule); a backend whose jobs ran two engines has none such; an optimisation level is said of the
    jobs whose engine has one."""
    base = sources[0][1]

    def job(backend: str, engine: str, level: str | None):
        changed = copy.deepcopy(base)
        changed.study.backend, changed.study.engine = backend, engine
        changed.study.engine_options = {"opt_level": level} if level is not None else {}
        return changed

    lines = _not_measured([job("torch", "PyTorch 2.11.0", None), job("cudnn", "cuDNN engine 91900", "3")])
    assert "- other versions of PyTorch 2.11.0, cuDNN engine 91900." in lines
    assert "- builder optimisation levels other than 3." in lines
    lines = _not_measured([job("torch", "PyTorch 2.11.0", None), job("cudnn", "cuDNN engine 91900", "3"),
                           job("cudnn", "cuDNN engine 92000", "4")])
    assert "- other versions of PyTorch 2.11.0." in lines and not any("optimisation" in line for line in lines)
    lines = _not_measured([job("torch", "PyTorch 2.11.0", None), job("torch", "PyTorch 2.12.0", None)])
    assert not any(line.startswith("- other versions") or "optimisation" in line for line in lines)
