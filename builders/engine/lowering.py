"""How the cuDNN / cuBLASLt engine lowers a model's graph into layers, as TensorRT lowers explicit Q/DQ.

Pure analysis over a plain description of the graph (`OpNode`s, from builders.engine.graph): no torch,
no cuDNN, so every decision is testable on the CPU with stand-ins. The decisions:

- each convolution becomes one cuDNN graph that fuses what follows it while the value has one user:
  no-ops (a folded BatchNorm's Identity, Dropout), one activation cuDNN fuses (ReLU, SiLU, sigmoid,
  GELU), one residual add whose operands have one shape (the graph's residual has its output's shape: an add
  that broadcasts, a global-context block's (N, C, 1, 1) term onto its (N, C, H, W) input, stays a PyTorch op);
  its output is quantized to FP8 in the same graph (with the consumers' input scale) when every consumer is an FP8
  layer reading it as its input and all of them share one scale;
- each linear becomes one `torch._scaled_mm` (FP8, scales and bias fused) or an fp16 linear;
- an FP8 layer whose input is not FP8 gets a quantize layer of its own (one per value and scale);
- every other op runs as an fp16 PyTorch op, a layer of its own;
- a layer asked for in FP8 that cannot run in FP8 (`refused[path]` says why) runs in fp16, and says so.

Regions that generated fused kernels may run instead of their steps (maximal connected sets of the steps the engine
runs as PyTorch ops, squeeze-excitation blocks' convolutions with them) are found in the same description:
builders.engine.fusion_regions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

FUSABLE_ACTIVATIONS = ("relu", "swish", "sigmoid", "gelu")  # cuDNN pointwise modes the conv graph fuses
QUANTIZE_SUFFIX = ".input_quantizer"  # the quantize layer's name: its first consumer's name plus this
GLOBAL_AVG_POOL, CONV_1X1 = "global_avg_pool", "conv1x1"  # OpNode.fn of a global average pool, a 1x1 convolution
DEPTHWISE_CONV = "depthwise_conv"  # OpNode.fn of a depthwise convolution (groups == Cin == Cout), not 1x1


@dataclass(frozen=True)
class OpNode:
    """One node of the traced graph.

    kind: input | output | const | conv | linear | act | add | noop | concat | pool | norm | softmax | elementwise |
    shuffle | conv_fn | matmul (a functional convolution, linear or matmul: a PyTorch op) | other.
    `args` names the nodes it reads, in order (`args[0]` is a conv's or linear's input); `path` is the
    module path of a module call, else the innermost module the op ran in ("" at the root).
    """

    name: str
    kind: str
    args: tuple[str, ...] = ()
    path: str = ""
    act: str | None = None  # for kind act: relu | swish | sigmoid | gelu | another word (not fused)
    leaf_reason: str | None = None  # a module run as one PyTorch call because tracing into it failed
    label: str = ""  # the layer name of an op that stays a PyTorch op (a module call: its path)
    # what the node calls, as the recognisers of fusion regions read it: `global_avg_pool` (a mean over the two
    # spatial dimensions, an adaptive average pool to 1x1), `conv1x1` (a Conv2d of kernel 1, stride 1, no padding),
    # `depthwise_conv` (another Conv2d whose groups, input and output channels are one number), else the function's
    # or method's name without underscores (`mul`, `div`) or the module's class name
    fn: str = ""


@dataclass
class Step:
    """One layer of the engine, in execution order.

    kind: conv (cuDNN graph) | linear (cuBLASLt or fp16 linear) | quantize | torch (an fp16 PyTorch op) | fused
    (generated kernels for a region of steps the engine runs as PyTorch ops, or one such op:
    builders.engine.fusion_regions, builders.engine.fused_tactics).
    `node` is the graph node whose value the step produces; `inputs` the values it reads (node names, or
    a quantize step's name); `absorbed` the nodes folded into a conv's epilogue (a fused step: every node of
    its region); `epilogue` what the cuDNN graph computes after the convolution (bias always: `("relu",)`,
    `("add", "relu")`, ...); `source` the conv's or linear's own node (its epilogue's nodes are in `absorbed`).
    """

    name: str
    kind: str
    node: str
    inputs: tuple[str, ...]
    precision: str  # what runs: fp8 | fp16
    op: str  # the session's op word: conv, linear, quantize, activation, concat, ...
    absorbed: tuple[str, ...] = ()
    epilogue: tuple[str, ...] = ()
    output_fp8: bool = False  # the conv graph writes FP8 for its consumers (the next Q fused)
    output_scale_of: str | None = None  # the consumer whose input scale quantizes the output
    scale_of: str | None = None  # quantize steps: the FP8 layer whose input scale they use
    fallback: str | None = None  # why an FP8 layer runs in fp16, or a layer as a PyTorch op
    asked: str = "fp16"  # the precision the recipe asked for
    source: str = ""

    @property
    def residual(self) -> str | None:
        """The value a conv step's epilogue adds (its second input), or None where it adds none."""
        return self.inputs[1] if self.kind == "conv" and len(self.inputs) > 1 else None


def step_nodes(step: Step) -> set[str]:
    """The graph nodes whose values a step computes: a layer's own node and those fused into it; none for a quantize
    step (it computes no node of the graph)."""
    if step.kind == "quantize":
        return set()
    return {step.source or step.node, *step.absorbed}


@dataclass
class Program:
    steps: list[Step]
    output: str  # the node whose value is the model's output
    input: str = ""  # the node that takes the model's input


def lower(nodes: list[OpNode], fp8: set[str], scale_keys: Mapping[str, object],
          refused: Mapping[str, str], output_refused: Mapping[str, str] | None = None,
          value_shapes: Mapping[str, tuple[int, ...]] | None = None) -> Program:
    """The engine's layers for `nodes` (topological order).

    `fp8`: module paths the recipe runs in FP8 (empty for the fp16 engine); `scale_keys[path]`: an FP8
    layer's input scale, compared for equality only (layers with equal keys share a quantize layer and
    a fused output quantize); `refused[path]`: why that layer has no FP8 kernel (it runs in fp16), and
    `refused[path + "@fp16"]` why it has no cuDNN graph at all (a PyTorch op); `output_refused[path]`:
    why a conv graph could not also write FP8 (its consumers then get quantize layers); `value_shapes[node]`: the
    shape of a node's value (`graph.record_run`), where given an add fuses only where both operands' are known and
    equal (without it, by structure alone).
    """
    nodes = without_noops(nodes)
    by_name = {node.name: node for node in nodes}
    users = users_of(nodes)
    main: dict[str, Step] = {}  # conv / linear node -> its step
    absorbed: set[str] = set()  # nodes fused into a conv's graph
    for node in nodes:
        if node.kind not in ("conv", "linear"):
            continue
        step = _layer_step(node, fp8, refused)
        if step.kind == "conv":
            chain = _epilogue_chain(node, by_name, users, absorbed, value_shapes)
            step.absorbed = tuple(n.name for n in chain)
            step.epilogue = tuple("add" if n.kind == "add" else str(n.act) for n in chain)
            step.inputs += tuple(n.args[1] if n.args[0] == _before(chain, n, node) else n.args[0]
                                 for n in chain if n.kind == "add")
            step.node = chain[-1].name if chain else node.name
            absorbed.update(step.absorbed)
        main[node.name] = step
    _fuse_output_quantize(main, users, scale_keys, output_refused or {})
    steps = _ordered_steps(nodes, main, absorbed, fp8, refused)
    output = next(node for node in nodes if node.kind == "output")
    model_input = next((node.name for node in nodes if node.kind == "input"), "")
    return Program(_insert_quantizers(steps, scale_keys), output.args[0] if output.args else "", model_input)


def without_noops(nodes: list[OpNode]) -> list[OpNode]:
    """The graph with every no-op removed and its readers reading its input instead."""
    alias: dict[str, str] = {}
    kept = []
    for node in nodes:
        args = tuple(alias.get(a, a) for a in node.args)
        if node.kind == "noop" and args:
            alias[node.name] = args[0]
            continue
        kept.append(dataclasses.replace(node, args=args))
    return kept


def users_of(nodes: list[OpNode]) -> dict[str, list[str]]:
    """Each node's readers, in graph order (a node reading a value twice counts once)."""
    table: dict[str, list[str]] = {node.name: [] for node in nodes}
    for node in nodes:
        for arg in dict.fromkeys(node.args):
            table.setdefault(arg, []).append(node.name)
    return table


def _layer_step(node: OpNode, fp8: set[str], refused: Mapping[str, str]) -> Step:
    asked = "fp8" if node.path in fp8 else "fp16"
    if node.kind == "conv" and f"{node.path}@fp16" in refused:  # no cuDNN graph at all: a PyTorch op
        return Step(node.path, "torch", node.name, node.args[:1], "fp16", "conv", fallback=refused[f"{node.path}@fp16"],
                    asked=asked, source=node.name)
    reason = refused.get(node.path) if asked == "fp8" else None
    return Step(node.path, node.kind, node.name, node.args[:1], "fp16" if reason else asked, node.kind,
                fallback=reason, asked=asked, source=node.name)


def _epilogue_chain(conv: OpNode, by_name: Mapping[str, OpNode], users: Mapping[str, list[str]],
                    absorbed: set[str], value_shapes: Mapping[str, tuple[int, ...]] | None) -> list[OpNode]:
    """What follows `conv` and fuses into its graph: while the value has one user, one fusable
    activation and one add whose other operand is not the chain's own value (and, where `value_shapes` are given,
    has the chain value's shape); a node another conv fused already (an add of two convolutions' outputs goes to
    the first) stops the chain."""
    chain: list[OpNode] = []
    current = conv
    seen_act = seen_add = False
    while len(users.get(current.name, [])) == 1:
        user = by_name[users[current.name][0]]
        if user.name in absorbed:
            break
        if user.kind == "act" and not seen_act and user.act in FUSABLE_ACTIVATIONS and user.args[:1] == (current.name,):
            seen_act = True
        elif (user.kind == "add" and not seen_add and len(user.args) == 2 and user.args.count(current.name) == 1
              and _same_shape(user, value_shapes)):
            seen_add = True
        else:
            break
        chain.append(user)
        current = user
    return chain


def _same_shape(add: OpNode, value_shapes: Mapping[str, tuple[int, ...]] | None) -> bool:
    """Whether `add`'s two operands have one known shape (True where no shapes are given: structure alone)."""
    if value_shapes is None:
        return True
    first, second = (value_shapes.get(arg) for arg in add.args)
    return first is not None and first == second


def _before(chain: list[OpNode], node: OpNode, conv: OpNode) -> str:
    """The chain value that feeds `node` (the conv's own value where `node` comes first)."""
    index = chain.index(node)
    return chain[index - 1].name if index else conv.name


def _fuse_output_quantize(main: dict[str, Step], users: Mapping[str, list[str]], scale_keys: Mapping[str, object],
                          output_refused: Mapping[str, str]) -> None:
    """A conv graph writes FP8 where every reader is an FP8 layer taking it as its input, all with one scale."""
    for step in main.values():
        if step.kind != "conv" or step.name in output_refused:
            continue
        readers = [main.get(name) for name in users.get(step.node, [])]
        if not readers or any(r is None or r.precision != "fp8" or r.kind not in ("conv", "linear")
                              or r.inputs[:1] != (step.node,) for r in readers):
            continue
        keys = {scale_keys.get(r.name, r.name) for r in readers if r is not None}
        if len(keys) == 1 and readers[0] is not None:
            step.output_fp8, step.output_scale_of = True, readers[0].name


def _ordered_steps(nodes: list[OpNode], main: dict[str, Step], absorbed: set[str], fp8: set[str],
                   refused: Mapping[str, str]) -> list[Step]:
    """Steps in graph order; a conv with an epilogue runs where its last fused node stood. A module the recipe
    quantizes that runs as a PyTorch op (a convolution that is not a Conv2d) asked for FP8 and says why it runs fp16
    (`refused`)."""
    at_node = {step.node: step for step in main.values()}
    steps: list[Step] = []
    for node in nodes:
        if node.name in at_node:
            steps.append(at_node[node.name])
        elif node.name in absorbed or node.name in main or node.kind in ("input", "output", "const"):
            continue
        else:
            asked = "fp8" if node.label and node.label in fp8 else "fp16"
            reason = refused.get(node.label) if asked == "fp8" else None
            steps.append(Step(_torch_name(node), "torch", node.name, node.args, "fp16",
                              OP_WORDS.get(node.kind, "other"), fallback=node.leaf_reason or reason, asked=asked))
    return steps


def _torch_name(node: OpNode) -> str:
    """A module call is named by its path; a function or method by the module it ran in and its node."""
    if node.label:
        return node.label
    return f"{node.path}.{node.name}" if node.path else node.name


OP_WORDS = {"act": "activation", "add": "elementwise", "concat": "concat", "pool": "pooling",
            "norm": "normalization", "softmax": "softmax", "conv": "conv", "linear": "linear",
            "elementwise": "elementwise", "shuffle": "shuffle", "conv_fn": "conv", "matmul": "matmul"}


def _insert_quantizers(steps: list[Step], scale_keys: Mapping[str, object]) -> list[Step]:
    """A quantize layer before each FP8 layer whose input is not already FP8 with its scale; layers that
    read one value with one scale share it."""
    fp8_values = {step.node: step.output_scale_of for step in steps if step.output_fp8}
    made: dict[tuple[str, object], Step] = {}
    result: list[Step] = []
    for step in steps:
        if step.kind in ("conv", "linear") and step.precision == "fp8":
            source = step.inputs[0]
            scale = scale_keys.get(step.name, step.name)
            producer = fp8_values.get(source)
            if producer is None or scale_keys.get(producer, producer) != scale:
                quantizer = made.get((source, scale))
                if quantizer is None:
                    name = step.name + QUANTIZE_SUFFIX
                    quantizer = Step(name, "quantize", name, (source,), "fp8", "quantize", scale_of=step.name,
                                     asked="fp8")
                    made[(source, scale)] = quantizer
                    result.append(quantizer)
                step.inputs = (quantizer.node, *step.inputs[1:])
        result.append(step)
    return result
