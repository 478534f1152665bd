"""A fused region's function compiled by Inductor without dynamo, and kept as bytes: Inductor's standalone
artifact (`torch._inductor.standalone_compile`, saved and loaded in its binary format), so that a later build loads
the compiled code instead of tracing the region with dynamo again, and so that worker processes can compile regions
side by side and hand the code back (`builders.engine.compiler`).

The region's function (`builders.engine.region_graph.Subgraph.module`) is first traced to ATen operations on example
tensors (`aten_graph`, `make_fx`): the graph Inductor compiles then holds only operator calls, which Inductor's
caches can serialize (a graph that calls modules or tensor methods cannot be saved). It always returns a tuple;
`RegionFunction` gives the caller the region's one output, or the tuple of its outputs, as the function did.

The bytes carry the hash of the torch build that compiled them: another build refuses to load them
(`load_region` raises; the caller compiles again). Loading runs the native code the bytes hold: they come from the
user's own cache folder, as cuDNN's serialized plans do (`builders.engine.plans.TimingCache`).
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from builders.cache_files import MAX_PLAN_BYTES
from sessions.documents.input_files import read_regular_file
from sessions.documents.storage import scratch_path, write_atomically

COMPILE_WORDS = "Inductor, default options, no CUDA graphs of its own"  # how a fused tactic's code was made
AGREEMENT = 2e-2  # a loaded function's largest difference from the region's own, relative to the largest value


class RegionFunction:
    """A compiled region's function called as the region is: its one output, or the tuple of its outputs."""

    def __init__(self, compiled: Callable[..., Any]) -> None:
        self.compiled = compiled

    def __call__(self, *args: torch.Tensor) -> Any:
        outputs = self.compiled(*args)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def aten_graph(module: torch.fx.GraphModule, args: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    """`module` traced to ATen operations on `args` (their values are read, not kept), returning a tuple of its
    outputs whatever `module` returns."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def tupled(*values: torch.Tensor) -> tuple[Any, ...]:
        result = module(*values)
        return result if isinstance(result, tuple) else (result,)

    with torch.no_grad():
        return make_fx(tupled)(*args)


def compile_region(module: torch.fx.GraphModule, args: Sequence[torch.Tensor]) -> tuple[RegionFunction, bytes | None]:
    """`module` compiled by Inductor for the shapes, strides and dtypes of `args` (`aten_graph`, then
    `standalone_compile`), and the artifact's bytes, None where Inductor could not serialize it (the function still
    runs). Raises what Inductor raises where it cannot compile."""
    graph = aten_graph(module, args)
    with torch.no_grad():
        artifact = torch._inductor.standalone_compile(graph, list(args), dynamic_shapes="from_example_inputs",
                                                      options={})
    try:
        blob = _saved_bytes(artifact)
    except Exception:  # noqa: BLE001  (an artifact Inductor cannot serialize runs, but is compiled again next time)
        blob = None
    return RegionFunction(artifact), blob


def _saved_bytes(artifact: Any) -> bytes:
    with scratch_path(".inductor") as kept:
        artifact.save(path=str(kept), format="binary")
        return read_regular_file(kept, "compiled region", MAX_PLAN_BYTES)


def import_loader() -> None:
    """Import what `load_region` imports the first time it runs (Inductor's `compile_fx`: about a second), so that a
    build takes that second where it waits anyway (for its regions' compiles)."""
    import torch._inductor.compile_fx  # noqa: F401


HASHING_SWITCH_S = 0.0005  # the interpreter's switch interval while Triton's files are hashed on a thread


def hash_triton_in_background() -> threading.Thread | None:
    """Triton's `triton_key` (a SHA-256 of its installed compiler, its 480 MB libtriton among it: 0.39 s of a warm
    H100 main job's first region load, benchmarks/results/h100/freeze-count/sampled/) computed on a thread of its
    own, so that the first `load_region` (Inductor asks for it) finds it computed (Triton keeps it for the process).
    The thread, or None where Triton does not import, no thread starts, or one was started before in this process.

    Triton is imported on the caller's thread first: the thread then imports nothing a study's own imports could be
    waiting for. Hashing 1 MiB at a time, the thread asks for the interpreter after every read and every update,
    and beside a thread that runs Python all the while it waited the switch interval each time (5.89 s for what took
    0.46 s alone on this project's CPU machine; 1.08 s with a 0.5 ms interval: benchmarks/results/cpu/
    interpreter-costs.txt): while it runs the interval is `HASHING_SWITCH_S`, then as it was. Makes no CUDA call."""
    global _triton_hashing
    if _triton_hashing is not None:
        return None
    triton_key = _triton_key()
    if triton_key is None:
        return None

    def hashed() -> None:
        try:
            triton_key()
        except Exception:  # noqa: BLE001, S110  (the region load computes it again, and says why it fails)
            pass
        finally:
            sys.setswitchinterval(interval)

    interval = sys.getswitchinterval()
    thread = threading.Thread(target=hashed, name="triton-key", daemon=True)
    sys.setswitchinterval(HASHING_SWITCH_S)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: the interval as it was, the region load hashes
        sys.setswitchinterval(interval)
        return None
    _triton_hashing = thread
    return thread


_triton_hashing: threading.Thread | None = None  # the one `hash_triton_in_background` started in this process


def _triton_key() -> Callable[[], str] | None:
    """Triton's `triton_key`, where torch's Inductor finds it (`torch._inductor.runtime.triton_compat`); None where
    Triton is absent or does not import (the region load says why, where it needs Triton)."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            return importlib.import_module(module).triton_key  # type: ignore[no-any-return]
        except Exception:  # noqa: BLE001, S112  (absent, moved, or a broken install: the next place, else none)
            continue
    return None


def load_region(blob: bytes) -> RegionFunction:
    """The function an artifact's bytes (`compile_region`) hold. Raises where they do not load (another torch
    build's, or damaged bytes).

    Loaded with one Inductor compile thread: the code the bytes hold asks Inductor for each of its GPU kernels, and
    with more than one thread Inductor starts its compile-worker pool for that ask even where the kernel is already
    compiled (the bytes carry Triton's compiled kernels, or Triton's cache holds them), a pool whose start and end
    cost seconds of a build (docs/engine.md, "The warm run"). A kernel that is in neither is compiled in this
    process."""
    from torch._inductor import config

    with scratch_path(".inductor") as kept, config.patch(compile_threads=1):
        write_atomically(kept, blob, "compiled region")
        artifact = torch._inductor.CompiledArtifact.load(path=str(kept), format="binary")  # type: ignore[attr-defined]
        return RegionFunction(artifact)


def disagreement(function: Callable[..., Any], module: torch.fx.GraphModule,
                 args: Sequence[torch.Tensor]) -> str | None:
    """Why `function` does not compute what `module` computes on `args` (a loaded artifact that is another region's
    code, or damaged), or None where every output has the region's shape and dtype and differs from it by at most
    AGREEMENT of its largest finite magnitude (at least 1), with NaN and infinities where the region has them."""
    with torch.no_grad():
        got, expected = function(*args), module(*args)
    got_all = got if isinstance(got, tuple) else (got,)
    expected_all = expected if isinstance(expected, tuple) else (expected,)
    if len(got_all) != len(expected_all):
        return f"{len(got_all)} outputs where the region has {len(expected_all)}"
    for position, (mine, theirs) in enumerate(zip(got_all, expected_all, strict=True)):
        if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
            return (f"output {position} is {mine.dtype} {tuple(mine.shape)} where the region's is {theirs.dtype} "
                    f"{tuple(theirs.shape)}")
        a, b = mine.float(), theirs.float()
        finite = torch.isfinite(b)
        if not torch.equal(finite, torch.isfinite(a)) or not torch.equal(a[~finite].nan_to_num(), b[~finite]
                                                                          .nan_to_num()):
            return f"output {position} has NaN or infinities where the region's has none, or the other way"
        scale = max(1.0, float(b[finite].abs().max())) if bool(finite.any()) else 1.0
        worst = float((a[finite] - b[finite]).abs().max()) if bool(finite.any()) else 0.0
        if worst > AGREEMENT * scale:
            return f"output {position} differs from the region's by {worst:.3g} (largest value {scale:.3g})"
    return None
