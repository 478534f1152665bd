"""What a convolution or linear layer computes, as a hashable key: layers with equal specs run the
same kernels, so the FP8 probe measures each spec once and keeps the count."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class LayerSpec:
    op: str  # conv | linear
    input_shape: tuple[int, ...]  # with the batch dimension
    out_channels: int  # output channels, or out_features
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    groups: int = 1
    bias: bool = False
    padding_mode: str = "zeros"  # anything else: PyTorch pads in a kernel of its own, no FP8 path here
    # what an engine fuses after the layer, in order (activation words, "add" of a residual); () for the layer alone
    epilogue: tuple[str, ...] = ()

    @property
    def in_channels(self) -> int:
        return self.input_shape[1] if self.op == "conv" else self.input_shape[-1]

    @property
    def pointwise(self) -> bool:
        """A 1x1 convolution that is a plain GEMM over the pixels of a channels-last tensor."""
        return (
            self.op == "conv"
            and self.groups == 1
            and all(k == 1 for k in self.kernel)
            and all(s == 1 for s in self.stride)
            and all(p == 0 for p in self.padding)
        )

    def output_shape(self) -> tuple[int, ...]:
        if self.op == "linear":
            return (*self.input_shape[:-1], self.out_channels)
        spatial = tuple(
            (size + 2 * pad - dil * (k - 1) - 1) // step + 1
            for size, k, step, pad, dil in zip(
                self.input_shape[2:], self.kernel, self.stride, self.padding, self.dilation, strict=False
            )
        )
        return (self.input_shape[0], self.out_channels, *spatial)

    def gemm_size(self) -> tuple[int, int, int]:
        """(M, N, K) of the layer as one GEMM (per group for grouped convolutions)."""
        out = self.output_shape()
        if self.op == "linear":
            rows = 1
            for d in self.input_shape[:-1]:
                rows *= d
            return rows, self.out_channels, self.in_channels
        pixels = out[0]
        for d in out[2:]:
            pixels *= d
        per_group = self.in_channels // self.groups
        taps = 1
        for k in self.kernel:
            taps *= k
        return pixels, self.out_channels // self.groups, per_group * taps

    def label(self) -> str:
        dims = "x".join(str(d) for d in self.input_shape)
        if self.op == "linear":
            return f"linear {self.in_channels}->{self.out_channels} @ {dims}"
        kernel = "x".join(str(k) for k in self.kernel)
        stride = f" /{self.stride[0]}" if any(s != 1 for s in self.stride) else ""
        groups = f" g{self.groups}" if self.groups > 1 else ""
        epilogue = "".join(f" +{word}" for word in self.epilogue)
        return f"conv {kernel}{stride}{groups} {self.in_channels}->{self.out_channels} @ {dims}{epilogue}"


def spec_of(module, x) -> LayerSpec | None:
    """The spec of an nn.Conv2d or nn.Linear called on `x`; None for other modules."""
    import torch

    if isinstance(module, torch.nn.Conv2d):
        return LayerSpec(
            op="conv",
            input_shape=tuple(x.shape),
            out_channels=module.out_channels,
            kernel=tuple(module.kernel_size),
            stride=tuple(module.stride),
            padding=_numeric_padding(module),
            dilation=tuple(module.dilation),
            groups=module.groups,
            bias=module.bias is not None,
            padding_mode=_padding_mode(module),
        )
    if isinstance(module, torch.nn.Linear):
        return LayerSpec(op="linear", input_shape=tuple(x.shape), out_channels=module.out_features,
                         bias=module.bias is not None)
    return None


def _numeric_padding(module) -> tuple[int, ...]:
    """Padding per spatial dimension ('same' as its left side where PyTorch pads unevenly)."""
    if isinstance(module.padding, str):
        if module.padding == "valid":
            return tuple(0 for _ in module.kernel_size)
        return tuple(d * (k - 1) // 2 for k, d in zip(module.kernel_size, module.dilation, strict=False))
    return tuple(module.padding)


def _padding_mode(module) -> str:
    if module.padding_mode != "zeros":
        return module.padding_mode
    if module.padding == "same" and any(d * (k - 1) % 2
                                        for k, d in zip(module.kernel_size, module.dilation, strict=False)):
        return "uneven same"
    return "zeros"


def group_by_spec(specs: Iterable[tuple[str, LayerSpec]]) -> dict[LayerSpec, list[str]]:
    """Layer names per spec, specs in first-seen order, names in call order."""
    groups: dict[LayerSpec, list[str]] = {}
    for name, spec in specs:
        groups.setdefault(spec, []).append(name)
    return groups
