"""`export --format md` can go into a README as it is (sessions/reports/export.py): no machine's path, the method as
it ran on the session's device, medians named, counts in the number they take, and the flagged layers with their
reasons. Expected values are read from the sessions' raw JSON."""

from __future__ import annotations

import re
import shutil

import orjson
import pytest

from sessions.reports.sections import portable_argv
from tests.conftest import ROOT, run_cli

CPU_RUN = ROOT / "benchmarks/results/cpu/run-1.json"  # resnet18 on a CPU, no CUDA graph
GPU_RUN = ROOT / "benchmarks/results/h200/dpn68-engine.json"  # H200, CUDA graph, an FP8 engine on sm80 kernels
BAD_PLURAL = re.compile(r"(?<![\d.])1 (?:[a-z]+ )?(?:inferences|rounds|iterations|calls|kernels|groups|layers)\b")


@pytest.fixture(params=[CPU_RUN, GPU_RUN], ids=["cpu", "h200"])
def exported(request, tmp_path) -> tuple[str, str, dict]:
    """A session copied into a deep folder of this machine, exported from there: (markdown, folder, raw JSON)."""
    folder = tmp_path / "user-data" / "sessions"
    folder.mkdir(parents=True)
    copy = folder / request.param.name
    shutil.copy(request.param, copy)
    result = run_cli("export", str(copy))
    assert result.returncode == 0, result.stderr
    return result.stdout, str(tmp_path), orjson.loads(request.param.read_bytes())


def test_no_machine_path_and_the_rerun_line_uses_the_file_name(exported):
    text, folder, raw = exported
    name = raw["study"]["command"][raw["study"]["command"].index("--out") + 1].rsplit("/", 1)[-1]
    assert folder not in text and "$OUT" not in text and "$RUNS" not in text and "/root" not in text
    rerun = text[text.index("## Rerun"):]
    session_file = (CPU_RUN if raw["study"]["device"] == "cpu" else GPU_RUN).name
    assert f"\ntrt-inspect rerun {session_file}  #" in rerun
    assert f"--out {session_file}" in rerun and name == session_file  # the study's own --out, by name only


def test_the_method_is_true_to_the_device_and_names_medians(exported):
    text, _, raw = exported
    method = text[text.index("## Method"):text.index("## Environment")]
    assert "(graph)" not in method and "(s)" not in method
    assert "median of every sample" in method
    if raw["study"]["device"] == "cpu":
        assert "CUDA" not in method and "timed runs" in method
        discard = re.search(r"each after (\d+) discarded inference(s?)\b", method)
        assert discard is not None and (discard.group(2) == "") == (discard.group(1) == "1")
    else:
        assert "CUDA graph on" in method and "timed CUDA-graph replays" in method
    calls = raw["variants"][0]["trace"]["calls"]
    assert f"{calls} eager call{'s' if calls != 1 else ''} traced" in method
    assert not BAD_PLURAL.search(text), BAD_PLURAL.search(text)


def _fp8_layers_on_pre_fp8_kernels(variant: dict) -> set[str]:
    """Layers run in fp8 whose every kernel names an architecture below sm89 (no FP8 tensor cores): read here
    from the raw kernel table, not through sessions.analyses.lowering."""
    kernels, layers = variant["kernels"], variant["layers"]
    archs: dict[int, list[int | None]] = {}
    for owner, name_id in zip(kernels["layer"], kernels["name"], strict=False):
        token = re.search(r"(?:^|[^a-z0-9])sm_?(\d{2,3})[af]?(?:[^a-z0-9]|$)", kernels["names"][name_id],
                          re.IGNORECASE)
        archs.setdefault(owner, []).append(int(token.group(1)) if token else None)
    return {layers[i]["name"] for i, found in archs.items() if 0 <= i < len(layers)
            and layers[i]["precision"] == "fp8" and found and None not in found and max(found) < 89}


def test_the_why_the_flagged_layers_and_their_reasons(exported):
    text, _, raw = exported
    groups = text[text.index("## Kernels per call by group"):text.index("## Method")]
    expected = {v["name"]: _fp8_layers_on_pre_fp8_kernels(v) for v in raw["variants"] if v.get("kernels")}
    flagged = {name: layers for name, layers in expected.items() if layers}
    if not flagged:
        assert "No layer is flagged" in groups
        return
    for variant, layers in flagged.items():
        line = next(line for line in groups.splitlines() if line.startswith(f"- {variant}: "))
        arch = re.search(r"fp8 on (sm\d+) kernels", line)
        assert arch is not None and f"{len(layers)} layers flagged ({len(layers)} {arch.group(0)})" in line
        shown = re.findall(r"`([^`]+)`", line)
        assert shown and set(shown) <= layers


def test_portable_argv_keeps_relative_names_and_options():
    argv = ["trt-inspect", "run", "m", "--groups", "/home/me/rules.toml", "--calib-dir=~/imgs",
            "--out", "$OUT/s/x.json", "--variants", "fp16,fp8", "rel/path.json"]
    assert portable_argv(argv, "x.json") == ["trt-inspect", "run", "m", "--groups", "rules.toml", "--calib-dir=imgs",
                                             "--out", "x.json", "--variants", "fp16,fp8", "rel/path.json"]
    assert portable_argv(["a", "--out=/abs/y.json"], "z.json") == ["a", "--out=z.json"]
