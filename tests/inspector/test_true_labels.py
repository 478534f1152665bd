"""Labels that are true: a layer's precision says what ran and whether it was asked, the same words in the TUI's
detail pane and in `show --layers`; the two CoV figures and the NaN/Inf counts are named."""

from __future__ import annotations

import copy

import pytest

from inspector.tui.app import InspectorApp
from sessions.analyses import captions
from sessions.analyses.captions import precision_of
from sessions.documents import storage
from tests.conftest import H200, ROOT, run_cli

CPU = ROOT / "benchmarks" / "results" / "cpu" / "dpn68-fp32-fp8.json"  # simulated fp8 on a CPU: no engine ran
REAL = ROOT / "benchmarks" / "results" / "h200" / "dpn68-engine.json"  # real fp8 kernels (cuDNN) on an H200


@pytest.fixture(scope="module")
def simulated():
    return storage.load(CPU).variant("fp8-all")


@pytest.fixture(scope="module")
def real():
    return storage.load(REAL).variant("cudnn-fp8-all")


def test_a_simulated_layer_says_simulated_and_whether_the_recipe_quantized_it(simulated):
    recipe = simulated.recipe
    labels = {layer.name: precision_of(simulated, layer) for layer in simulated.layers}
    quantized = labels[recipe.quantized[0]]
    # older sessions: "fp8 simulated"
    assert captions.SIMULATED_TAG in quantized.ran and quantized.asked == "fp8 (recipe)"
    assert "quantized by the recipe" in quantized.why and "no fp8 kernel ran" in quantized.why
    stem = labels[recipe.excluded[0]]
    assert (stem.ran, stem.asked) == ("fp32", "kept out (recipe)") and "kept out of fp8 by the recipe" in stem.why
    others = [label for name, label in labels.items() if name not in recipe.quantized and name not in recipe.excluded]
    assert others and all(label.asked in ("not quantized (recipe)", "added (recipe)") for label in others)
    assert not any("engine" in label.words for label in labels.values())  # no engine ran on this CPU


def test_a_real_layer_says_real_and_a_fallback_says_so_with_its_reason(real):
    conv = next(layer for layer in real.layers if layer.quantized and layer.op == "conv")
    assert precision_of(real, conv).words == "fp8 (quantized by the recipe; real fp8 kernels)"
    fell_back = copy.deepcopy(conv)
    fell_back.precision, fell_back.quantized = "fp16", False
    fell_back.attrs.update(asked="fp8", fallback="no engine for 4 channels per group")
    label = precision_of(real, fell_back)
    assert not label.honoured and label.asked == "fp8 (recipe)"
    assert label.why.endswith("the engine fell back to fp16: no engine for 4 channels per group")


async def test_the_tui_detail_and_show_layers_say_the_same_words(simulated):
    from inspector.tui.screens.tables import LayersScreen

    session = storage.load(CPU)
    stem_name = simulated.recipe.excluded[0]
    app = InspectorApp(session=session, path=CPU)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.push_screen(LayersScreen(session, app.rules, "fp8-all", None, "role", ["dpn68"]))  # every layer
        await pilot.press("slash", *f"^{stem_name}$", "enter")
        await pilot.pause()
        text = app.screen.panel.query_one(".table-detail").render().plain
    stem = next(layer for layer in simulated.layers if layer.name == stem_name)
    assert f"precision: {precision_of(simulated, stem).words}" in text
    shown = run_cli("show", str(CPU), "--layers", "--variant", "fp8-all")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.startswith(stem_name + " "))
    assert "kept out (recipe)" in line
    relu = next(layer for layer in simulated.layers if layer.kind.startswith("ReLU"))
    relu_line = next(line for line in shown.stdout.splitlines() if line.startswith(relu.name + " "))
    assert "not quantized (recipe)" in relu_line and " fp8 " not in relu_line  # never "asked fp8" for every layer


def test_the_two_cov_figures_and_the_nonfinite_counts_are_named():
    from sessions.reports import views

    session = storage.load(H200 / "senet154-mainjob-warm.json")
    labels = views.session_variant_table(session).labels
    assert captions.SAMPLE_COV in labels and "CoV %" not in labels  # the table's: over every sample
    assert captions.NONFINITE_VALUES in labels and "NaN/Inf" not in labels
    assert captions.unstable_line(session, ["x"]).startswith(captions.ROUND_COV)  # the noise rule's: round medians
