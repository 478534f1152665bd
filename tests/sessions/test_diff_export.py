import copy

import orjson
import pytest

from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import load_rules
from sessions.analyses.layer_match import align_layers
from sessions.documents import storage
from sessions.documents.model import Layer, Tensor
from sessions.reports.export import SECTIONS, export_csv, export_markdown
from sessions.reports.tables import markdown_table_problems, render_markdown
from tests.conftest import H200, run_cli

B1 = H200 / "senet154-h200.json"
B8 = H200 / "senet154-h200-b8.json"


@pytest.fixture(scope="module")
def session():
    return storage.load(B1)


def test_a_session_against_itself_has_no_regression(session):
    diff = diff_sessions(session, copy.deepcopy(session), load_rules())
    assert diff.regressions == [] and diff.matched_variants == ["fp16", "fp8-all", "fp8-no-se"]


def shifted(session, factor: float):
    """A copy whose fp16 samples (and so every statistic) are `factor` times the original's."""
    moved = copy.deepcopy(session)
    lat = moved.variant("fp16").latency
    lat.samples_ms = [s * factor for s in lat.samples_ms]
    lat.round_medians_ms = [m * factor for m in lat.round_medians_ms]
    lat.median_ms *= factor
    return moved


def test_latency_is_judged_by_the_noise_rule_then_the_threshold(session):
    def latency_change(factor):
        diff = diff_sessions(session, shifted(session, factor), load_rules())
        change = next(c for c in diff.changes if c.what == "latency" and c.item == "fp16")
        return change.verdict, [c.what for c in diff.regressions]

    assert latency_change(1.0) == ("within noise", [])
    assert latency_change(1.04) == ("slower", [])  # outside both bands (250 samples each), under the 5 % threshold
    assert latency_change(1.06) == ("slower", ["latency"])
    assert latency_change(0.94) == ("faster", [])


def test_a_new_per_group_split_is_a_regression(session):
    from tests.sessions.test_groups import doctor

    newer = copy.deepcopy(session)
    fp16 = newer.variant("fp16")
    target = "layer3.10.conv2"
    have = sum(1 for i in fp16.kernels.layer if fp16.layers[i].name == target)
    newer.variants[0] = doctor(fp16, target, 64 - have)
    diff = diff_sessions(session, newer, load_rules())
    whats = {(c.what, c.item) for c in diff.regressions}
    assert ("split", target) in whats and ("layer kernels", target) in whats


def test_layers_align_by_onnx_nodes_then_signature():
    # constructed layers (not TensorRT output): a renamed layer keeps its ONNX node, a pool keeps its shapes
    pool = [Tensor("t", "fp16", [1, 8, 4, 4])]
    a = [Layer("x", "Conv", onnx_nodes=["/a/Conv"]), Layer("y", "Pool", kernel_shape=[2, 2], inputs=pool)]
    b = [Layer("renamed", "Conv", onnx_nodes=["/a/Conv"]), Layer("y2", "Pool", kernel_shape=[2, 2], inputs=pool),
         Layer("z", "Add")]
    alignment = align_layers(a, b)
    assert alignment.pairs == [(0, 0), (1, 1)] and alignment.only_a == [] and alignment.only_b == [2]
    assert alignment.how == {(0, 0): "nodes", (1, 1): "signature"}


def test_diff_command_exit_codes():
    real = run_cli("diff", str(B1), str(B8))  # batch 8 serves ~5x the images per second: per image, no regression
    assert real.returncode == 0 and "per image" in real.stdout and "batch 1 against 8" in real.stdout
    same = run_cli("diff", str(B1), str(B1), "--format", "json")
    assert same.returncode == 0 and orjson.loads(same.stdout)["regressions"] == 0
    bad = run_cli("diff", str(B1), str(B1), "--threshold", "lots")
    assert bad.returncode == 2 and "--threshold" in bad.stderr


def test_markdown_export_renders_every_section(session):
    text = export_markdown(session, load_rules(), path=str(B1))
    assert markdown_table_problems(text) == []
    for heading in ("## Comparison", "## Quality", "## Kernels per call by group", "## Method", "## Environment",
                    "## Recipe", "## Rerun"):
        assert heading in text
    assert "CUDA-graph replay" in text and "trt-inspect run senet154" in text
    assert "| fp8-all | ModelOpt" in text and "| 254 |" in text


def test_the_markdown_check_catches_a_wrong_column_count():
    good = render_markdown(["a", "b"], [[1, "x|y"]])
    assert markdown_table_problems(good) == []  # the pipe inside a cell is escaped
    broken = good + "\n| 1 | 2 | 3 |"
    assert markdown_table_problems(broken) == ["line 4: 3 cells, header has 2"]
    with pytest.raises(ValueError):
        render_markdown(["a", "b"], [[1]])


def test_csv_and_sections_and_overwrite(session, tmp_path):
    assert export_csv(session).splitlines()[0].startswith("variant,median ms")
    assert len(export_csv(session).splitlines()) == 4
    out = tmp_path / "r.md"
    first = run_cli("export", str(B1), "--sections", "comparison,method", "-o", str(out))
    assert first.returncode == 0 and out.read_text().count("## ") == 2
    again = run_cli("export", str(B1), "-o", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    unknown = run_cli("export", str(B1), "--sections", "poetry")
    assert unknown.returncode == 2 and "unknown section" in unknown.stderr
    assert set(SECTIONS) >= {"comparison", "rerun"}
