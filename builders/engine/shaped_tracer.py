"""A torch.fx tracer that knows every traced value's shape: each op also runs on fake tensors (shapes and dtypes,
no data, no memory, no arithmetic), so the shapes, sizes, ranks and lengths a model reads while tracing are plain
values, not graph nodes. Models that unpack `x.shape` into a tuple, build a view's shape from it or iterate a
module's tuple output (Hugging Face transformers: SegFormer, ViT, ...) then trace with every `nn.Linear` and
`nn.Conv2d` a module call of its own, named by its module path.

The contract: the graph holds the traced input's shapes as constants, so it computes the model only at that
input shape (the engine runs at one static shape). Control flow on tensor data (`if x.sum() > 0`) still fails to
trace, as with torch.fx's own tracer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

UNKNOWN: Any = object()  # a value the fake run could not compute: the proxy then behaves as torch.fx's own


DTYPE_WORDS = {torch.float16: "fp16", torch.float32: "fp32", torch.bfloat16: "bf16"}


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's layout without its data: what ShapedTracer needs of an argument, what a fused region's scratch
    tensors copy (`scratch`) and what its signature states (`words`)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorSpec:
        return cls(tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, tensor.device)

    def scratch(self) -> torch.Tensor:
        """A tensor of this shape, strides, dtype and device: standard normal where it is floating point."""
        tensor = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        return tensor.normal_() if tensor.is_floating_point() else tensor.zero_()

    def words(self) -> str:
        return f"{DTYPE_WORDS.get(self.dtype, str(self.dtype))} {'x'.join(map(str, self.shape))} s{self.stride}"


def specs_of(value: Any) -> Any:
    """`value` with every tensor replaced by its TensorSpec (nested tuples, lists and dicts kept)."""
    return _mapped(value, lambda v: TensorSpec.of(v)
                   if isinstance(v, torch.Tensor) else v)


def _mapped(value: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn` applied to every leaf of nested tuples, lists and dicts."""
    if isinstance(value, (tuple, list)):
        return type(value)(_mapped(v, fn) for v in value)
    if isinstance(value, dict):
        return {key: _mapped(v, fn) for key, v in value.items()}
    return fn(value)


class ShapedProxy(torch.fx.Proxy):
    """A proxy with its fake value: shape, size(), dim(), ndim, dtype, device and len() answer from it (and
    iteration, through ShapedTracer.iter); without one, they are graph nodes as in torch.fx."""

    value: Any = UNKNOWN

    def _known(self) -> bool:
        return self.value is not UNKNOWN

    shape = property(lambda self: self._known_or_node("shape"))
    ndim = property(lambda self: self._known_or_node("ndim"))
    dtype = property(lambda self: self._known_or_node("dtype"))
    device = property(lambda self: self._known_or_node("device"))

    def _known_or_node(self, name: str) -> Any:
        """The fake value's attribute `name` where the value is known, else a graph node reading it."""
        return getattr(self.value, name) if self._known() else self._attribute(name)

    def size(self, dim: int | None = None) -> Any:
        if self._known():
            return self.value.size() if dim is None else self.value.size(dim)
        args = (self,) if dim is None else (self, dim)
        return self.tracer.create_proxy("call_method", "size", args, {})

    def dim(self) -> Any:
        return self.value.dim() if self._known() else self.tracer.create_proxy("call_method", "dim", (self,), {})

    def __len__(self) -> int:
        if self._known():
            return len(self.value)
        return super().__len__()

    def _attribute(self, name: str) -> Any:
        return self.tracer.create_proxy("call_function", getattr, (self, name), {})


class ShapedTracer(torch.fx.Tracer):
    """torch.fx's tracer over `root` called with `arguments` (its forward's parameters by name, tensors or
    TensorSpecs: only shapes, strides, dtypes and devices are read; None: no values, torch.fx's own trace);
    module paths in `leaves` (relative to the traced module) stay one call each, as torch's own leaf modules do."""

    def __init__(self, leaves: set[str], arguments: Mapping[str, Any] | None) -> None:
        super().__init__()
        self.leaves = leaves
        self.fake = FakeTensorMode(allow_non_fake_inputs=True)
        self.shaped = arguments is not None
        self.arguments = {name: self._faked(value) for name, value in (arguments or {}).items()}
        self._running = False  # computing a fake value: modules run their forward, attributes are plain

    def _faked(self, value: Any) -> Any:
        def fake(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                return self.fake.from_tensor(v)
            if isinstance(v, TensorSpec):
                with self.fake:
                    return torch.empty_strided(v.shape, v.stride, dtype=v.dtype, device=v.device)
            return v

        return _mapped(value, fake)

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        return module_qualified_name in self.leaves or super().is_leaf_module(m, module_qualified_name)

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return ShapedProxy(node, self)

    def create_proxy(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     name: str | None = None, type_expr: Any = None, proxy_factory_fn: Any = None) -> torch.fx.Proxy:
        made = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        if self.shaped and isinstance(made, ShapedProxy):
            made.value = self._value(kind, target, args, kwargs)
        return made

    def _value(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kind == "placeholder":
            name = str(target).lstrip("*")
            return self.arguments[name] if name in self.arguments else (args[0] if args else UNKNOWN)
        values: list[Any] = []
        torch.fx.node.map_aggregate((args, kwargs), lambda v: values.append(v.value) if isinstance(v, ShapedProxy)
                                    else None)
        if any(value is UNKNOWN for value in values):
            return UNKNOWN
        plain_args, plain_kwargs = torch.fx.node.map_aggregate(
            (args, kwargs), lambda v: v.value if isinstance(v, ShapedProxy) else v)
        self._running = True
        try:
            with self.fake:
                if kind == "call_function":
                    return target(*plain_args, **plain_kwargs)
                if kind == "call_method":
                    return getattr(plain_args[0], target)(*plain_args[1:], **plain_kwargs)
                if kind == "call_module":
                    return self.root.get_submodule(target)(*plain_args, **plain_kwargs)
                if kind == "get_attr":
                    value: Any = self.root
                    for part in str(target).split("."):
                        value = getattr(value, part)
                    return value
        except Exception:  # noqa: BLE001  (an op fake tensors cannot run: its shape is then a graph node)
            return UNKNOWN
        finally:
            self._running = False
        return UNKNOWN

    def iter(self, obj: torch.fx.Proxy) -> Iterator[Any]:
        """Iterating a proxy with a value (a tuple a module returned, a tensor's rows): its items, each a node.
        (torch.fx's Proxy.__iter__ handles `a, b = proxy` itself and asks the tracer for everything else.)"""
        value = getattr(obj, "value", UNKNOWN)
        if value is not UNKNOWN and isinstance(value, (torch.Tensor, tuple, list)):
            return iter([cast(Any, obj)[index] for index in range(len(value))])
        return super().iter(obj)

    def call_module(self, m: torch.nn.Module, forward: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._running:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self._running:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)


def bound_arguments(module: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`module`'s forward parameters by name for a call with `args` and `kwargs` (what ShapedTracer takes)."""
    signature = inspect.signature(module.forward)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {}
    return dict(bound.arguments)
