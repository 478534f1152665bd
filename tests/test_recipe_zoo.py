"""Every named recipe on eight timm families and SegFormer quantizes what its definition says (CPU, random weights).

The figures are those of tests/data/recipe_zoo.txt (benchmarks/recipe_zoo.py prints the table).
"""

from pathlib import Path

import pytest

from benchmarks.recipe_zoo import ZOO, zoo_row

# recipe cells: all, no-se, no-se-no-first-stage, encoder-linears ("refused": before any work, beside `all`)
EXPECTED = {
    "resnet18": ("19/21", "19/21 refused", "15/21", "0/1 refused"),
    "seresnext26d_32x4d": ("44/48", "28/48", "21/48", "0/1 refused"),
    "regnety_002": ("69/71", "43/71", "39/71", "0/1 refused"),
    "efficientnet_b0": ("80/82", "48/82", "46/82", "0/1 refused"),
    "mobilenetv3_small_050": ("51/54", "33/54", "31/54", "0/1 refused"),
    "convnext_atto": ("39/41", "39/41 refused", "33/41", "0/1 refused"),
    "vit_tiny_patch16_224": ("48/50", "48/50 refused", "44/50", "36/49"),
    "senet154": ("254/258", "154/258", "144/258", "0/1 refused"),  # the SENet study: 254 / 154 / 144 of 257 convs
    "hf:segformer-b0": ("65/72", "65/72 refused", "65/72 refused", "40/52"),  # the SegFormer study: 40 matmuls
    "hf:segformer-b5": ("416/423", "416/423 refused", "416/423 refused", "260/316"),  # and 260
}


@pytest.mark.slow
@pytest.mark.parametrize("model", list(ZOO.values()))
def test_recipe_counts_per_family(model):
    cells, _ = zoo_row(model)
    assert tuple(cells.values()) == EXPECTED[model]


def test_the_saved_table_holds_the_expectations():
    table = (Path(__file__).parent / "data" / "recipe_zoo.txt").read_text()
    for model, cells in EXPECTED.items():
        line = next(line for line in table.splitlines() if f" {model} " in line)
        assert [c.replace(" refused", "") for c in cells] == [c for c in line.split()[2:] if "/" in c]
