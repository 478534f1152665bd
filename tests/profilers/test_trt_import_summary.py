"""trtexec's performance summary as an imported variant's latency, the layer-time sum kept apart, and the model and
batch trtexec's own command line gives.

The logs are hand-written in the layouts of the real logs under ../shared/fixtures/trt (8.0.3's `result-FP32.txt`,
10.16's `result-03.log`, the 7.x headings of tests/data/trt_text/trt7-dumpprofile.log); every expected figure is read
back from the written text by `_stated` below, a regular expression that shares nothing with the importer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from sessions.documents import storage
from tests.conftest import TESTS, run_cli
from tests.trt_sets import SHARED

STAMP = "[03/07/2022-05:05:52] [I] "
TRT7 = TESTS / "data" / "trt_text" / "trt7-dumpprofile.log"
TRT10 = TESTS / "data" / "trt_text" / "trt10-dumplayerinfo-dumpprofile.log"
RESNET = SHARED / "trt" / "trt8.4-resnet-a100-fp32"
LAYERS_80 = """[03/07/2022-05:05:49] [V] [TRT] Engine Layer Information:
Layer(CaskConvolution): Conv__25 + Relu, Tactic: 7144526460361122478, x:0[Float(-2,1,28,28)] \
-> Relu:0[Float(-2,32,28,28)]
Layer(TiledPooling): MaxPool2d, Tactic: 6226177, Relu:0[Float(-2,32,28,28)] -> MaxPool2d:0[Float(-2,32,14,14)]
Layer(CublasConvolution): MatMul + add_2 + Relu_2, Tactic: 1, MaxPool2d:0[Float(-2,32,14,14)] \
-> Relu_2_out_tensor[Float(-2,1024,1,1)]
"""


def _summary_80(gpu: tuple[float, float, float, float, float], queries: int = 19295) -> str:
    """8.0-8.4's summary: one percentile, End-to-End Host Latency, `Timing trace has N queries` before it."""
    low, high, mean, median, p99 = gpu
    return "".join(f"{STAMP}{line}\n" for line in (
        f"Timing trace has {queries} queries over 3.00036 s",
        "=== Performance summary ===",
        "Throughput: 6430.89 qps",
        ("Latency: min = 0.156982 ms, max = 0.384766 ms, mean = 0.160129 ms, median = 0.159668 ms, "
        "percentile(99%) = 0.165771 ms"),
        ("End-to-End Host Latency: min = 0.171387 ms, max = 0.504395 ms, mean = 0.284758 ms, median = 0.289673 ms, "
        "percentile(99%) = 0.298828 ms"),
        ("Enqueue Time: min = 0.0300293 ms, max = 0.126465 ms, mean = 0.0396717 ms, median = 0.0333252 ms, "
        "percentile(99%) = 0.0698242 ms"),
        ("H2D Latency: min = 0.00317383 ms, max = 0.0455933 ms, mean = 0.00408154 ms, median = 0.00366211 ms, "
        "percentile(99%) = 0.00854492 ms"),
        (f"GPU Compute Time: min = {low} ms, max = {high} ms, mean = {mean} ms, median = {median} ms, "
        f"percentile(99%) = {p99} ms"),
        ("D2H Latency: min = 0.00170898 ms, max = 0.0136719 ms, mean = 0.00237128 ms, median = 0.00219727 ms, "
        "percentile(99%) = 0.00341797 ms"),
        "Total Host Walltime: 3.00036 s",
    ))


def _log_80(command: str, summary: str = "", layers: str = LAYERS_80) -> str:
    return (f"&&&& RUNNING TensorRT.trtexec [TensorRT v8003] # trtexec {command}\n{STAMP}=== Model Options ===\n"
            f"{layers}{summary}&&&& PASSED TensorRT.trtexec [TensorRT v8003] # trtexec {command}\n")


def _stated(text: str) -> dict[str, float]:
    """The GPU compute figures a log states, read by a regular expression of this test (7.x headings or 8.x+ lines)."""
    line = re.search(r"GPU Compute Time: min = ([\d.]+) ms, max = ([\d.]+) ms, mean = ([\d.]+) ms, median = ([\d.]+) ms"
                     r"(.*)$", text, re.MULTILINE)
    if line:
        found = dict(zip(("min", "max", "mean", "median"), map(float, line.groups()[:4]), strict=False))
        found.update({f"p{level}": float(value)
                      for level, value in re.findall(r"percentile\((\d+)%\) = ([\d.]+)", line[5])})
        return found
    block = text[text.index("[I] GPU Compute\n"):]
    found = {key: float(value) for key, value in re.findall(r"\] (min|max|mean|median): ([\d.]+) ms", block)[:4]}
    found.update({f"p{level}": float(value)
                  for value, level in re.findall(r"percentile: ([\d.]+) ms at (\d+)%", block)[:1]})
    return found


def _import(path: Path, batch: int | None = None):
    return import_variant(ImportFiles.of(layers=path, find_metadata=False), batch=batch)


def test_the_8_0_summary_is_the_latency_with_its_queries_and_transfers(tmp_path: Path) -> None:
    log = tmp_path / "result-FP32.txt"
    log.write_text(_log_80("--onnx=model.onnx --saveEngine=model-FP32.plan --shapes=x:0:4x1x28x28 --verbose",
                           _summary_80((0.151367, 0.373779, 0.15368, 0.153564, 0.156677))))
    imported = _import(log)
    latency, summary, stated = imported.variant.latency, imported.variant.performance, _stated(log.read_text())
    assert latency is not None and summary is not None
    assert (latency.min_ms, latency.max_ms, latency.mean_ms, latency.median_ms, latency.p99_ms) == (
        stated["min"], stated["max"], stated["mean"], stated["median"], stated["p99"])
    # nothing the file does not state
    assert latency.p90_ms is None and latency.cov is None and latency.samples_ms == []
    queries = int(re.search(r"Timing trace has (\d+) queries", log.read_text())[1])
    assert summary.queries == queries and summary.source == log.name
    assert summary.h2d is not None and summary.h2d.median_ms == float(re.search(r"H2D Latency: .*?median = ([\d.]+)",
                                                                                  log.read_text())[1])
    assert summary.end_to_end is not None and summary.throughput_qps == 6430.89
    assert summary.layer_sum_ms is None  # a log without a table: no layer times to sum


@pytest.mark.parametrize("source", ["7.x headings", "10.x lines"])
def test_the_summary_of_every_layout_is_the_latency(source: str) -> None:
    path = TRT7 if source == "7.x headings" else TRT10
    imported = import_variant(ImportFiles.of(profile=path, metadata=[path], find_metadata=False))
    latency, stated = imported.variant.latency, _stated(path.read_text())
    assert latency is not None
    assert (latency.median_ms, latency.mean_ms, latency.min_ms, latency.max_ms, latency.p99_ms) == (
        stated["median"], stated["mean"], stated["min"], stated["max"], stated["p99"])
    assert latency.p90_ms == stated.get("p90")


def test_the_profile_metadata_json_summary_is_the_latency_where_no_times_were_exported() -> None:
    if not RESNET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    meta = RESNET / "resnet.onnx.engine.profile.metadata.json"
    imported = import_variant(ImportFiles.of(layers=RESNET / "resnet.onnx.engine.graph.json", metadata=[meta],
                                             find_metadata=False))
    low, high, mean, median, p99 = json.loads(meta.read_text())["performance_summary"]["GPU Compute Time"]
    latency = imported.variant.latency
    assert latency is not None and (latency.min_ms, latency.max_ms, latency.mean_ms, latency.median_ms) == (
        low, high, mean, median) and latency.p99_ms == p99


def test_the_summed_layer_times_are_kept_apart_and_never_shown_as_the_latency(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = run_cli("import", "--layers", str(TRT10), "--profile", str(TRT10), "--out", str(out))
    assert result.returncode == 0, result.stderr
    variant = storage.load(out).variants[0]
    rows = re.findall(r"\]\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(?!Total)\S", TRT10.read_text())
    stated = _stated(TRT10.read_text())
    assert variant.latency is not None and variant.latency.median_ms == stated["median"]
    assert variant.performance is not None and variant.performance.layer_sum_ms == pytest.approx(sum(map(float, rows)))
    assert variant.performance.layer_sum_ms != variant.latency.median_ms
    assert "no latency measured" not in result.stdout and "sum of layer times" not in result.stdout
    assert any("per-layer synchronisation" in note for note in variant.notes)
    assert "per-layer synchronisation" in storage.load(out).method.per_layer


def test_diff_and_the_verdict_use_the_summary_not_the_layer_sum(tmp_path: Path) -> None:
    """A's layers sum to more than B's, but B's GPU compute median is twice A's: B is the slower engine."""
    text = TRT10.read_text()
    slow = text.replace("median = 0.0410 ms", "median = 0.0820 ms").replace(
        "       50.00       0.0250       0.0248      50.0", "       30.00       0.0150       0.0148      30.0").replace(
        "      100.00       0.0500       0.0494     100.0   Total",
        "       80.00       0.0400       0.0394     100.0   Total")
    (tmp_path / "a.log").write_text(text)
    (tmp_path / "b.log").write_text(slow)
    for name in ("a", "b"):
        log = str(tmp_path / f"{name}.log")
        imported = run_cli("import", "--layers", log, "--profile", log, "--out", str(tmp_path / f"{name}.json"))
        assert imported.returncode == 0
    result = run_cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json")
    changes = json.loads(result.stdout)["changes"]
    latency = [c for c in changes if c["what"] == "latency"]
    assert len(latency) == 1 and latency[0]["regression"] and result.returncode == 1
    assert (latency[0]["a"], latency[0]["b"]) == (_stated(text)["median"], _stated(slow)["median"])
    assert not [c for c in changes if c["what"] == "summed layer time"]
    session = storage.load(tmp_path / "a.json")
    session.variants.append(storage.load(tmp_path / "b.json").variants[0])
    session.variants[1].name = "b"
    storage.save(session, tmp_path / "ab.json")
    shown = run_cli("show", str(tmp_path / "ab.json"))
    assert shown.returncode == 0 and "2.00x" in shown.stdout  # B's median over A's, not the sums' ratio


@pytest.mark.parametrize("command, model, batch, named, shaped", [
    ("--loadEngine=./trt_plans/model_128S.plan --shapes=input:16x3x224x224", "model_128S", 16, "--loadEngine",
     "--shapes"),
    ("--onnx=nets/resnet.onnx --saveEngine=r.plan --minShapes=x:1x3x32x32 --optShapes=x:8x3x32x32", "resnet", 8,
     "--onnx", "--optShapes"),
    ("--uff=old.uff --saveEngine=lenet.engine --batch=4", "lenet", 4, "--saveEngine", "--batch"),
])
def test_the_model_and_batch_are_trtexecs_own_options(tmp_path: Path, command: str, model: str, batch: int,
                                                      named: str, shaped: str) -> None:
    log = tmp_path / "detailed_report.txt"
    log.write_text(_log_80(command))
    imported = _import(log)
    given = dict(re.findall(r"(--\w+)=(\S+)", command))
    assert imported.model == Path(given[named]).name.split(".")[0] == model
    assert imported.batch == int(re.split(r"[:x]", given[shaped])[-4] if shaped != "--batch"
                                 else given[shaped]) == batch
    notes = " | ".join(imported.variant.notes)
    assert f"trtexec's {named} option" in notes and f"batch {batch} from trtexec's {shaped} option" in notes
    assert "batch unknown" not in notes


def test_a_summary_figure_that_is_not_a_number_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(_log_80("--loadEngine=m.plan", _summary_80((0.15, 0.37, 0.15, 0.15, 0.16))).replace(
        "median = 0.15 ms, percentile(99%) = 0.16", "median = nan ms, percentile(99%) = 0.16"))
    result = run_cli("import", "--layers", str(log), "--out", str(tmp_path / "s.json"))
    assert result.returncode == 2 and "GPU Compute Time median is nan" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def _benchmark(folder: Path, runs_s: list[float], double: bool) -> Path:
    """A benchmark script's result in the layout of the shared torch-tensorrt sets (config and seconds per run)."""
    doc = json.dumps({"config": {"model": "m", "runs": len(runs_s), "warmup": 5}, "latencies": runs_s})
    path = folder / "m_tensorrt_20241025-082821.json"
    path.write_text(json.dumps(doc) if double else doc)
    return path


@pytest.mark.parametrize("double", [True, False], ids=["double-encoded", "plain"])
def test_a_benchmark_result_beside_the_layers_is_the_latency_where_trtexec_states_none(tmp_path: Path,
                                                                                     double: bool) -> None:
    runs = [0.0012, 0.0014, 0.0011, 0.0013, 0.0019]
    _benchmark(tmp_path, runs, double)
    (tmp_path / "trt_engine_info.json").write_text(json.dumps({"Layers": ["conv1", "pool1"], "Bindings": ["x", "y"]}))
    out = tmp_path / "s.json"
    result = run_cli("import", str(tmp_path), "--out", str(out))
    assert result.returncode == 0, result.stderr
    session = storage.load(out)
    latency = session.variants[0].latency
    assert latency is not None and latency.median_ms == pytest.approx(sorted(runs)[2] * 1e3)
    assert len(latency.samples_ms) == len(runs) and session.method.timer == "unknown"
    assert "the script's own clock" in session.method.timed_region


def test_trtexecs_summary_comes_before_a_benchmark_result(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(_log_80("--loadEngine=m.plan", _summary_80((0.151367, 0.373779, 0.15368, 0.153564, 0.156677))))
    bench = _benchmark(tmp_path, [0.002, 0.003, 0.004], double=True)
    imported = import_variant(ImportFiles.of(layers=log, benchmark=bench, find_metadata=False))
    assert imported.variant.latency is not None
    assert imported.variant.latency.median_ms == _stated(log.read_text())["median"]
    assert any("kept out of the latency" in note for note in imported.variant.notes)
