"""Share of each variant's traced time that no role names ("other"), on small real models of the zoo's families.

    python benchmarks/other_share.py [MODEL ...] > benchmarks/results/cpu/other-share.txt

Per model (timm, pretrained=False, built on the CPU at its own input size, batch 1, one thread): the PyTorch fp32
variant traced as a study traces it (the backend's engine and layers, `torch.profiler` with one range per module,
`inspector.study.trace_kernels`), then its layer time per role (`sessions.analyses.groups.role_of`): the share in
"other", the largest role and the roles that hold the functional ops. Then the engine's lowered graph of the same
model (`builders.engine.graph.trace` and `builders.engine.lowering.lower`, fp16 recipe, no FP8): its layers' roles
(a convolution's from its groups, kernel shape and channels, as the engine records them and the PyTorch column has),
each timed on the CPU as the fx nodes it runs (a conv step with the nodes fused into it; nodes that compute no tensor
and no-ops left out, as they launch no kernel), and the share in "other". The engine itself needs a CUDA GPU; the CPU
times stand in for its layers' weights.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks.recipe_zoo import ZOO

if TYPE_CHECKING:
    from builders.engine.lowering import Step
    from sessions.documents.model import Layer

DEFAULT = ["resnet18", "legacy_seresnet18", "regnety_002", "mobilenetv3_small_050", "efficientnet_b0", "mixnet_s",
           "densenet121", "dpn68", "inception_v3", "dla34", "convnext_atto", "vit_tiny_patch16_224", "pvt_v2_b0",
           "vgg11"]
TRACE_CALLS = 2


def torch_roles(name: str) -> tuple[float, dict[str, float]]:
    """Traced ms per role of the PyTorch fp32 variant of `name` on the CPU, and the total."""
    from builders.models.catalog import load_model
    from builders.models.structure import model_structure
    from builders.pytorch.torch_backend import TorchEngine
    from inspector.study import trace_kernels
    from profilers.tracers import get_tracer
    from sessions.analyses.groups import builtin_rules, group_rows, role_of
    from sessions.documents.model import Variant

    model = load_model(name)
    module = model.module.float().eval()
    example = torch.randn(1, *model.input_size)
    engine = TorchEngine(module, "cpu", torch.float32, example, structure=model_structure(module, example))
    variant = Variant(name="fp32", backend="torch", precision="fp32", device="cpu")
    variant.layers = engine.layers()
    plan = SimpleNamespace(device="cpu", trace_calls=TRACE_CALLS, raw_trace=None)
    trace_kernels(variant, engine, plan, get_tracer("torch"))  # type: ignore[arg-type]
    rules = builtin_rules()
    rows = group_rows(variant, lambda layer: role_of(layer, rules))
    return sum(r.time_ms or 0.0 for r in rows), {r.group: r.time_ms or 0.0 for r in rows}


def engine_roles(name: str) -> tuple[float, dict[str, float]]:
    """CPU ms per role of the engine's fp16 lowering of `name` (`lowered_roles`), its layers of derived classes that
    compute their base class's operation made plain first, as the engine builds them (`plain_layers`)."""
    from builders.models.catalog import load_model
    from builders.models.plain_layers import plain_layers

    model = load_model(name)
    module = model.module.float().eval()
    plain_layers(module)
    return lowered_roles(module, torch.randn(1, *model.input_size))


def lowered_roles(module: torch.nn.Module, example: torch.Tensor) -> tuple[float, dict[str, float]]:
    """CPU ms per role of the engine's fp16 lowering of `module`: each fx node timed once (after a warm pass), its time
    given to the layer (step) that runs it, whose role is read from the layer as the engine describes it
    (`engine_layer`)."""
    from builders.engine.graph import record_run, trace
    from builders.engine.lowering import lower
    from sessions.analyses.groups import builtin_rules, role_of

    traced = trace(module, example)
    program = lower(traced.nodes, set(), {}, {}, value_shapes=record_run(traced, example).shapes)
    owner: dict[str, str] = {}
    rules = builtin_rules()
    convs = {node.path: node.name for node in traced.nodes if node.kind in ("conv", "linear")}
    modules = dict(module.named_modules())
    for step in program.steps:
        role = role_of(engine_layer(step, modules.get(step.name)), rules)
        own = [convs[step.name]] if step.kind in ("conv", "linear") and step.name in convs else []
        for node in (*own, step.node, *step.absorbed):
            owner[node] = role
    per_role: dict[str, float] = {}
    for node, ms in _node_times(traced.module, example).items():
        if node in owner:  # constants, inputs and no-ops are no layer of the engine's
            per_role[owner[node]] = per_role.get(owner[node], 0.0) + ms
    return sum(per_role.values()), per_role


def engine_layer(step: Step, module: torch.nn.Module | None) -> Layer:
    """The layer the engine writes for `step` (`module`: the module at its path, if any), in what a role reads: its
    kind and op, and for a convolution what the engine's build records of it (`builders.engine.build`: groups, kernel
    shape, channels, stride), which the PyTorch column's layers hold too; the rules tell pointwise, depthwise and
    grouped convolutions by them."""
    from sessions.documents.model import Layer

    layer = Layer(name=step.name, kind=step.kind, op=step.op)  # type: ignore[arg-type]
    conv = module if step.kind == "conv" else None
    if isinstance(conv, torch.nn.modules.conv._ConvNd):
        layer.groups, layer.kernel_shape = conv.groups, list(conv.kernel_size)
        layer.in_channels, layer.out_channels, layer.stride = conv.in_channels, conv.out_channels, list(conv.stride)
    return layer


def _node_times(module: torch.fx.GraphModule, example: torch.Tensor) -> dict[str, float]:
    """ms per fx node of one forward (the second; the first warms), for the nodes that compute a tensor (shape
    arithmetic and asserts launch no kernel on the GPU)."""
    times: dict[str, float] = {}

    class Timed(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node):  # type: ignore[override]
            started = time.perf_counter()
            result = super().run_node(n)
            if isinstance(result, torch.Tensor):
                times[n.name] = (time.perf_counter() - started) * 1e3
            return result

    with torch.no_grad():
        Timed(module).run(example)
        Timed(module).run(example)
    return times


def _share(total: float, roles: dict[str, float]) -> str:
    return f"{100 * roles.get('other', 0.0) / total:.1f} %" if total > 0 else "-"


def _top(roles: dict[str, float], total: float, count: int = 3) -> str:
    best = sorted(roles.items(), key=lambda kv: -kv[1])[:count]
    return ", ".join(f"{role} {100 * ms / total:.0f} %" for role, ms in best)


def main(names: list[str]) -> None:
    torch.set_num_threads(1)
    family = {model: fam for fam, (model, _) in ZOO.items()}
    print("| family | model | PyTorch fp32: traced ms | other | largest roles | engine fp16 lowering: CPU ms | other "
          "| largest roles |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        total, roles = torch_roles(name)
        try:
            e_total, e_roles = engine_roles(name)
            engine_cells = f"{e_total:.1f} | {_share(e_total, e_roles)} | {_top(e_roles, e_total)}"
        except Exception as exc:  # noqa: BLE001  (a model the engine cannot trace: said in the row)
            engine_cells = f"- | - | not lowered: {str(exc).splitlines()[0][:60]}"
        print(f"| {family.get(name, '')} | {name} | {total:.1f} | {_share(total, roles)} | {_top(roles, total)} | "
              f"{engine_cells} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
