"""Every millisecond has a named role: the op a module runs itself comes from the work its own forward does,
normalization is a role, the engine's lowered layers have ops, and no module of the zoo's families whose own
forward computes anything is left in "other".

Expected ops come from how each test module is written (what its forward calls and on what sizes), never from
builders.models.module_ops: a 3 x 3 pooling beside a concatenation is pooling, as the issue measured on the H200 (an
Inception model's pooling inside its blocks 29.4 ms against 1.25 ms of concatenations).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from benchmarks.recipe_zoo import ZOO, load_meta
from builders.engine.graph import trace
from builders.engine.lowering import lower
from builders.models.module_ops import own_op
from builders.models.structure import model_structure
from builders.pytorch.torch_backend import module_layer
from sessions.analyses.groups import OTHER, builtin_rules, role_of
from sessions.documents.model import Layer


class _PoolAndConcat(torch.nn.Module):
    """An Inception block's own work: a 3 x 3 max pooling of its input (9 reads per output), concatenated with a 1 x 1
    convolution's output (one read per output)."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = torch.nn.Conv2d(32, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch(x), F.max_pool2d(x, 3, 1, 1)], 1)


class _SplitConcat(torch.nn.Module):
    """MixNet's mixed convolution: its own work is a split and a concatenation only."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 5, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left, right = torch.split(x, 16, 1)
        return torch.cat([self.a(left), self.b(right)], 1)


class _FunctionalNorm(torch.nn.Module):
    """A block that normalizes functionally, channels last (timm's LayerNorm2d)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.weight = torch.nn.Parameter(torch.ones(32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(self.conv(x).permute(0, 2, 3, 1), (32,), self.weight).permute(0, 3, 1, 2)


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.pool_block = _PoolAndConcat()
        self.squeeze = torch.nn.Conv2d(40, 32, 1)
        self.norm_block = _FunctionalNorm()
        self.mixed = _SplitConcat()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mixed(self.norm_block(self.squeeze(self.pool_block(self.stem(x)))))


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return _Model().eval()


def test_a_block_takes_the_op_of_the_work_its_own_forward_does(model):
    structure = model_structure(model, torch.zeros(1, 3, 32, 32))
    assert structure.ops["pool_block"] == "pooling"  # the pooling, not the concatenation beside it
    assert structure.ops["mixed"] == "concat"
    assert structure.ops["norm_block"] == "normalization"  # the layer norm, not the permutes (views)
    rules = builtin_rules()
    roles = {path: role_of(module_layer(path, module, structure), rules) for path, module in model.named_modules()}
    assert roles["pool_block"] == "pooling / elementwise / activation"
    assert roles["norm_block"] == "normalization"
    assert roles["mixed"] == "concat / copy"


class _DropoutOnly(torch.nn.Module):
    """A model whose own forward calls only dropout (timm's GhostNetV2 head): nothing at inference."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.conv(x), p=0.2, training=self.training)


class _DropoutAndAdd(_DropoutOnly):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return F.dropout(y, p=0.2, training=self.training) + y


def test_dropout_is_no_work_of_a_modules_own():
    assert "" not in model_structure(_DropoutOnly().eval(), torch.zeros(1, 3, 16, 16)).ops
    assert model_structure(_DropoutAndAdd().eval(), torch.zeros(1, 3, 16, 16)).ops[""] == "elementwise"


@pytest.mark.parametrize("kind, op", [("BatchNorm2d", "normalization"), ("LayerNorm", "normalization"),
                                      ("GroupNorm", "normalization"), ("LayerNorm2d", "normalization"),
                                      ("Normalization", None), ("BatchNormAct2d", "normalization")])
def test_normalization_is_a_role_of_its_own(kind, op):
    assert role_of(Layer(name="blocks.0.norm", kind=kind, op=op), builtin_rules()) == "normalization"


def test_a_module_that_runs_fused_attention_itself_is_attention():
    assert role_of(Layer(name="blocks.0.attn", kind="Attention", op="attention"), builtin_rules()) == "attention"
    assert role_of(Layer(name="blocks.0.mix", kind="SelfMixer", op="attention"), builtin_rules()) == "attention"


class _Mixer(torch.nn.LSTM):
    """An LSTM of another name: its role must come from what it runs, not from its class's name."""


class _Recurrent(torch.nn.Module):
    """Sequencer's kind of block: recurrent layers over a sequence, their outputs concatenated."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.gru = torch.nn.LSTM(8, 8, batch_first=True), torch.nn.GRU(8, 8, batch_first=True)
        self.rnn, self.mixer = torch.nn.RNN(8, 8, nonlinearity="relu", batch_first=True), _Mixer(8, 8, batch_first=True)
        self.cell = torch.nn.GRUCell(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [layer(x)[0] for layer in (self.lstm, self.gru, self.rnn, self.mixer)]
        return torch.cat([*outputs, self.cell(x[:, 0]).unsqueeze(1)], 1)


def test_recurrent_layers_are_a_role_of_their_own_by_what_they_run():
    model = _Recurrent().eval()
    structure = model_structure(model, torch.zeros(1, 5, 8))
    layers = ("lstm", "gru", "rnn", "mixer", "cell")
    assert {path: structure.ops[path] for path in layers} == dict.fromkeys(layers, "recurrent")
    rules = builtin_rules()
    roles = {path: role_of(module_layer(path, module, structure), rules) for path, module in model.named_modules()}
    assert {path: roles[path] for path in layers} == dict.fromkeys(layers, "recurrent")
    assert roles[""] == "concat / copy"
    assert role_of(Layer(name="blocks.0.rnn_v", kind="LSTM", op=None), rules) == "recurrent"
    assert own_op({"lstm": 1.0, "cat": 100.0}) == "recurrent"  # its matrix products outweigh the copies beside it


def test_the_engines_lowered_layers_have_ops_for_functional_calls(model):
    traced = trace(model, torch.zeros(1, 3, 32, 32))
    program = lower(traced.nodes, set(), {}, {})
    ops = {step.name: step.op for step in program.steps}
    assert "other" not in ops.values(), ops
    assert {"normalization", "pooling", "concat", "shuffle"} <= set(ops.values())


ZOO_MODELS = [name for name, in_ci in ZOO.values() if in_ci]


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_no_module_of_the_zoo_that_computes_is_in_other(name):
    """Every module whose own forward calls a torch function on computed tensors (where its own time comes from)
    has a role; modules that only call their children spend no time of their own."""
    module, input_size = load_meta(name)
    structure = model_structure(module, torch.zeros(1, *input_size))
    rules = builtin_rules()
    unnamed = {path: (type(m).__name__, structure.ops[path]) for path, m in module.named_modules()
               if path in structure.ops and role_of(module_layer(path, m, structure), rules) == OTHER}
    assert not unnamed


class _HandNorms(torch.nn.Module):
    """Normalizations written by hand, each as its paper writes it, beside a squeeze-excitation-like gate (a mean
    and a product: no statistic a normalization scales by)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 8, 1)
        self.grn, self.rms, self.layer, self.gate = _Grn(), _Rms(), _LayerNormByHand(), _Gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(self.layer(self.rms(self.grn(self.stem(x)))))


class _Grn(torch.nn.Module):
    """ConvNeXt-V2's global response normalization: the L2 norm over positions, divided by its channel mean."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = x.norm(p=2, dim=(2, 3), keepdim=True)
        return x + x * (g / (g.mean(dim=1, keepdim=True) + 1e-6))


class _Rms(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)


class _LayerNormByHand(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = x.mean(1, keepdim=True), x.var(1, keepdim=True, unbiased=False)
        return (x - mean) / (var + 1e-5).sqrt()


class _Gate(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x.mean((2, 3), keepdim=True))


def test_a_normalization_written_by_hand_is_normalization_and_a_gate_is_not():
    ops = model_structure(_HandNorms().eval(), torch.randn(1, 8, 4, 4)).ops
    assert [ops[name] for name in ("grn", "rms", "layer")] == ["normalization"] * 3
    assert ops["gate"] != "normalization"


class _Affine(torch.nn.Module):
    """ResMLP's `Affine`, which timm passes as its norm layer: alpha * x + beta by `torch.addcmul`, no statistic."""

    def __init__(self) -> None:
        super().__init__()
        self.alpha, self.beta = torch.nn.Parameter(torch.ones(8)), torch.nn.Parameter(torch.zeros(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.beta, self.alpha, x)


class _Rescale(torch.nn.Module):
    """Elementwise math of one input: an exponent, a power and a negation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -(x.exp() ** 2)


def test_elementwise_math_written_with_torch_functions_is_elementwise():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), _Affine(), _Rescale()).eval()
    ops = model_structure(model, torch.randn(1, 4, 8)).ops
    assert [ops["1"], ops["2"]] == ["elementwise", "elementwise"]
