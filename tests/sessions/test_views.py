"""The one view model (sessions/reports/views.py, verdict.py) and what `show`, `groups` and `export` print from it."""

import csv
import dataclasses
import io
import subprocess
import sys

import orjson
import pytest

from sessions.analyses import captions
from sessions.analyses.groups import load_rules
from sessions.analyses.verdict import verdict_lines
from sessions.documents import storage
from sessions.reports import views
from sessions.reports.tables import format_value
from tests.conftest import H200, ROOT, run_cli

SESSION = H200 / "senet154-h200.json"


@pytest.fixture(scope="module")
def session():
    return storage.load(SESSION)


def test_the_verdict_names_the_slowdown_its_cause_and_the_splits(session):
    assert verdict_lines(session, load_rules())[0] == (
        "fp8-all (simulated) is 2.35x slower than fp16; quantize / dequantize adds 4.98 of the 6.58 ms; "
        "layer1.*.conv2 split into 64 kernels in every variant"
    )


def test_numbers_integers_one_unit_no_negative_zero():
    assert format_value(1636.0, "count") == "1636"
    assert format_value(-0.00001, "pct") == "0.0" and format_value(-0.0001, "delta_ms") == "0.000"
    assert format_value(4.72e-05, "seconds") == "0.00" and format_value(0.27, "seconds") == "0.27"
    assert format_value(1 / 50, "count") == "0.02" and format_value(0.0, "count") == "0"  # above zero never reads 0
    assert format_value(0.4256, "speedup") == "0.43x" and format_value(4572.0, "delta_count") == "+4572"


def test_one_speedup_definition_everywhere(session):
    """Above 1 is faster in the variant table, the group table and the groups JSON."""
    variants = views.session_variant_table(session)
    column = variants.labels.index("speed-up vs fp16 (>1 faster)")
    speedup = dict(zip(variants.keys, (row[column] for row in variants.rows), strict=False))
    assert speedup["fp8-all"] == pytest.approx(4.879 / 11.464, rel=1e-3)
    groups = views.group_table(session, load_rules())
    row = groups.rows[groups.keys.index("squeeze-excitation")]
    label = groups.labels.index("fp8-all speed-up (>1 faster)")
    ms = groups.labels.index("fp8-all ms"), groups.labels.index("fp16 ms")
    assert row[label] == pytest.approx(row[ms[1]] / row[ms[0]])
    document = orjson.loads(run_cli("groups", str(SESSION), "--json").stdout)
    se = next(g for g in document["groups"] if g["group"] == "squeeze-excitation")
    assert se["speedup"]["fp8-all"] == pytest.approx(row[label]) and "time_ratio" not in se


def test_flags_say_whether_the_baseline_has_them(session):
    table = views.flag_table(session)
    since = dict(zip(table.keys, (row[3] for row in table.rows), strict=False))
    assert since[("fp8-all", "layer1.0.conv2")] == "also in fp16" and since[("fp16", "layer1.0.conv2")] == "baseline"


def test_show_and_export_print_the_same_table_and_verdict(session, tmp_path):
    shown = run_cli("show", str(SESSION))
    exported = run_cli("export", str(SESSION), "--sections", "comparison")
    verdict = verdict_lines(session, load_rules())[0]
    assert verdict in shown.stdout and verdict in exported.stdout
    assert "1636" in shown.stdout and "1636.000" not in shown.stdout
    csv = run_cli("export", str(SESSION), "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("variant,median ms") and len(csv) == 4


@pytest.mark.parametrize("args", [["export", str(SESSION), "-o", "/nonexistent/x.md"],
                                  ["export", str(SESSION), "-o", "/tmp", "--force"]])
def test_unwritable_export_targets_are_one_line(args):
    """On the command line: one line on stderr, exit 2, no traceback."""
    result = run_cli(*args)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_rules_file_of_the_wrong_shape_is_one_line(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text("roles = 3\n")
    result = run_cli("groups", str(SESSION), "--groups", str(rules))
    assert (result.returncode == 2 and "roles must be an array of tables" in result.stderr
            and "Traceback" not in result.stderr)


def test_kineto_lines_stay_off_stderr():
    """torch.profiler (kineto) writes `USDT: ... profiler_start` to fd 2; the tracer drops those lines."""
    code = ("import torch; from profilers.torch_trace import trace; "
            "trace(lambda: torch.ones(4) + 1, 1, 'cpu'); import sys; print('kept', file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "USDT" not in result.stderr and "profiler_start" not in result.stderr and "kept" in result.stderr


COMPILE_SESSION = ROOT / "benchmarks/results/h200/engine-vs-compile/resnet50-b1-vs-compile.json"


def test_outside_layers_is_per_call_beside_kernels_per_call():
    """compile-fp16 traced 7 calls of 122 kernels, none in a layer: `show`, the CSV and the JSON summary say 122 outside
    layers per call, as they say 122 kernels per call (the session stores 854 over the 7 calls)."""
    raw = {v["name"]: v for v in orjson.loads(COMPILE_SESSION.read_bytes())["variants"]}
    expected = {}
    for name, variant in raw.items():
        calls = len(set(variant["kernels"]["call"]))
        expected[name] = (len(variant["kernels"]["layer"]) / calls,
                          sum(1 for owner in variant["kernels"]["layer"] if owner < 0) / calls)
    assert expected["compile-fp16"] == (122, 122)
    shown = run_cli("show", str(COMPILE_SESSION)).stdout.splitlines()
    header = next(line for line in shown if line.startswith("variant "))
    end = header.index("outside layers") + len("outside layers")
    for name, (per_call, outside) in expected.items():
        row = next(line for line in shown if line.startswith(f"{name} "))
        assert row[:end].split()[-2:] == [f"{per_call:.0f}", f"{outside:.0f}"]
    rows = {row["variant"]: row for row in csv.DictReader(io.StringIO(
        run_cli("export", str(COMPILE_SESSION), "--format", "csv").stdout))}
    document = orjson.loads(run_cli("show", str(COMPILE_SESSION), "--json").stdout)
    summaries = {v["name"]: v for v in document["variants"]}
    for name, (per_call, outside) in expected.items():
        assert float(rows[name]["kernels / call"]) == per_call and float(rows[name]["outside layers"]) == outside
        assert (summaries[name]["per_call"], summaries[name]["unattributed_per_call"]) == (per_call, outside)


def test_the_group_table_says_which_speedups_are_within_noise(session):
    """fp8-all's squeeze-excitation layers drawn 0.3x and 3x of fp16's in alternate calls (bands that must overlap
    fp16's, whatever the ratio of the means), every other layer 2x slower on every call (bands far apart): the table
    names squeeze-excitation alone as within noise."""
    import copy
    import random

    from sessions.analyses.groups import role_of

    edited = copy.deepcopy(session)
    rules, rng = load_rules(), random.Random(3)
    base, fp8 = edited.variant("fp16"), edited.variant("fp8-all")
    for layer in base.layers:
        if layer.time_ms:
            layer.call_times_ms = [layer.time_ms * rng.uniform(0.99, 1.01) for _ in range(7)]
    fp16_time = {layer.name: layer.time_ms for layer in base.layers}
    traced = sum(layer.time_ms or 0.0 for layer in fp8.layers)
    for layer in fp8.layers:
        reference = fp16_time.get(layer.name) or layer.time_ms
        if not reference:
            continue
        if role_of(layer, rules) == "squeeze-excitation":
            layer.call_times_ms = [reference * (0.3 if call % 2 else 3.0) for call in range(7)]
        else:
            layer.call_times_ms = [reference * 2 * rng.uniform(0.99, 1.01) for _ in range(7)]
        layer.time_ms = sum(layer.call_times_ms) / 7
    # the timed latency moves with the trace, as a slower variant's does (else the traces' paces part)
    factor = sum(layer.time_ms or 0.0 for layer in fp8.layers) / traced
    latency = fp8.latency
    fp8.latency = dataclasses.replace(
        latency, samples_ms=[t * factor for t in latency.samples_ms], min_ms=latency.min_ms * factor,
        median_ms=latency.median_ms * factor, mean_ms=latency.mean_ms * factor, max_ms=latency.max_ms * factor,
        p90_ms=latency.p90_ms and latency.p90_ms * factor, p99_ms=latency.p99_ms and latency.p99_ms * factor,
        std_ms=latency.std_ms and latency.std_ms * factor,
        round_medians_ms=[t * factor for t in latency.round_medians_ms])
    notes = [n for n in views.group_table(edited, rules, "role", ["fp16", "fp8-all"]).notes if "within noise" in n]
    assert len(notes) == 1 and notes[0].startswith("fp8-all: within noise")
    named = [part.rsplit(" ", 1)[0] for part in notes[0].split("): ", 1)[1].split("; ")]
    assert named == ["squeeze-excitation"]


def test_a_study_traced_with_no_tracer_says_so_where_imported_files_say_they_hold_no_kernels():
    untraced = storage.load(ROOT / "benchmarks/results/cpu/dpn68-fp32-fp8.json")
    assert all(v.kernels is None for v in untraced.variants) and untraced.study.source == "timm"
    lines = [n for n in views.group_table(untraced, load_rules()).notes if n.startswith("no kernel table")]
    assert lines == [f"no kernel table: {untraced.method.kernels}"]
    assert "files" not in views.kernel_table(untraced, untraced.variants[0], None).notes[0]
    imported = storage.load(SESSION)  # any session with variants: only the source decides
    imported.study.source = "trtexec"
    for variant in imported.variants:
        variant.kernels = None
    assert "these files hold layers and times" in next(n for n in views.group_table(imported, load_rules()).notes
                                                       if n.startswith("no kernel table"))
    # the kernel views say the same of each variant, whatever backend the import named (trtexec, tensorrt)
    for variant in imported.variants:
        variant.backend = "tensorrt"
        assert views.kernel_table(imported, variant, None).notes == (captions.NO_KERNEL_TABLE,)
        assert views.all_kernels_table(imported, variant).notes == (captions.NO_KERNEL_TABLE,)
    one_untraced = storage.load(SESSION)
    one_untraced.variants[1].kernels = None
    assert views.kernel_table(one_untraced, one_untraced.variants[1], None).notes == (
        f"no kernel table: no trace was recorded for {one_untraced.variants[1].name}",)


def test_a_quality_figure_reads_the_same_in_the_variant_table_and_the_markdown_quality_table():
    from sessions.reports.sections import quality_section

    real = storage.load(ROOT / "benchmarks/results/h200/matmul-tactic/final/main/senet154-warm.json")
    table = views.session_variant_table(real)
    shown = {key: dict(zip(table.labels, (format_value(v, c.kind) for v, c in zip(row, table.columns, strict=True)),
                           strict=True))
             for key, row in zip(table.keys, table.rows, strict=True)}
    rows = [line.split(" | ") for line in quality_section(real).splitlines() if line.startswith("| ")][1:]
    fp32_rows = [cells for cells in rows if cells[1] == "fp32 (PyTorch)"]
    assert len(fp32_rows) == len([v for v in real.variants if v.quality])
    for cells in fp32_rows:
        name = cells[0].removeprefix("| ")
        assert (cells[3], cells[4], cells[5]) == (shown[name]["top-1 %"], shown[name]["mean KL"],
                                                  shown[name]["max abs err"])


def test_a_group_change_within_the_baselines_drift_is_within_noise(session):
    """Every group of fp8-all 3 % slower than fp16's on every call, each call within 0.1 %: bands apart, no group is
    within noise; the same calls where fp16's timed rounds drifted 5 % either way (per-call bands are widened by their
    variant's drift): every group is."""
    import copy

    def within(edited) -> list[str]:
        notes = [n for n in views.group_table(edited, rules, "role", ["fp16", "fp8-all"]).notes if "within noise" in n]
        return [part.rsplit(" ", 1)[0] for note in notes for part in note.split("): ", 1)[1].split("; ")]

    edited, rules = copy.deepcopy(session), load_rules()
    base, fp8 = edited.variant("fp16"), edited.variant("fp8-all")
    fp16_time = {layer.name: layer.time_ms for layer in base.layers}
    for layer in base.layers:
        if layer.time_ms:
            layer.call_times_ms = [layer.time_ms * (1 + 0.001 * (call % 2)) for call in range(7)]
    for layer in fp8.layers:
        reference = fp16_time.get(layer.name) or layer.time_ms
        if reference:
            layer.call_times_ms = [reference * 1.03 * (1 + 0.001 * (call % 2)) for call in range(7)]
            layer.time_ms = sum(layer.call_times_ms) / 7
    assert within(edited) == []
    median = base.latency.median_ms
    base.latency.round_medians_ms = [median * 0.95, median, median * 1.05]
    assert len(within(edited)) >= 2
