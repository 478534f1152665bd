"""A backend and a tracer that need no torch and no GPU: the whole contract in a few lines."""

from __future__ import annotations

import contextlib

import numpy as np

from builders.backend import Backend, BuildResult, Capabilities, Engine, TimingStep, register_backend
from builders.models.info import ModelInfo
from builders.study_inputs import StudyInputs
from profilers.attribution import KernelRecord, Launch, Range, TraceRecords
from profilers.tracers import Tracer, register_tracer
from sessions.documents.model import Layer, Variant

LAYERS = ("conv1", "conv2", "fc")
SEEN: list[tuple[str, int]] = []  # (layer, kernels) as the fake engine runs inside its ranges


class FakeEngine(Engine):
    def __init__(self, scale: float):
        self.scale, self.calls, self.ranges_on = scale, 0, False

    def infer(self, batch): return np.asarray(batch) * self.scale
    def timing_step(self): return TimingStep(self.run_once, graphed=False, note="fake: eager")

    def run_once(self):
        self.calls += 1
        SEEN.extend((name, 2 if self.scale < 0 else 1) for name in LAYERS if self.ranges_on)

    @contextlib.contextmanager
    def layer_ranges(self, kind):
        self.ranges_on = True
        yield
        self.ranges_on = False
    def layers(self): return [Layer(name=n, kind="Fake", op="conv" if n != "fc" else "linear") for n in LAYERS]
    def release(self): pass


@register_backend
class FakeBackend(Backend):
    name, label = "fake", "Fake engine"
    capabilities = Capabilities(range_kinds=frozenset({"annotation"}))

    @classmethod
    def load_inputs(cls, plan):
        images = np.linspace(-1, 1, 4 * 10).reshape(4, 10)
        return StudyInputs(ModelInfo(plan.model, "timm", (10,)), "fake rows",
                           [images[i:i + plan.batch] for i in range(0, 4, plan.batch)],
                           images[: plan.batch], images[:2])

    def __init__(self, context): self.context = context
    def reference(self, batch): return np.asarray(batch)

    def build(self, variant, calibration):
        scale = {"fp32": 1.0, "fp16": 1.001}.get(variant.precision, -1.0)
        return BuildResult(FakeEngine(scale),
                           Variant(variant.name, self.name, variant.precision, self.context.plan.device))


@register_tracer
class FakeTracer(Tracer):
    """Turns what the fake engine ran inside its ranges into records: one range and N kernels per layer."""

    name, range_kind = "fake", "annotation"

    def describe(self, calls): return f"fake tracer, {calls} call(s)"

    def trace(self, run_once, calls, device, synchronize):
        SEEN.clear()
        ranges, kernels, launches, t = [], [], [], 0
        for call in range(calls):
            first = t
            run_once()
            for layer, count in SEEN[len(SEEN) - len(LAYERS):]:
                ranges.append(Range(layer, 1, t, t + 10))
                for _ in range(count):
                    launches.append(Launch(len(kernels), 1, t + 1))
                    kernels.append(KernelRecord(f"{layer}_kernel", t + 2, t + 5, len(kernels)))
                t += 10
            ranges.append(Range(f"trt-inspect/call/{call}", 1, first, t))
        return TraceRecords("fake", "kernel", calls, kernels, launches, ranges)


# --- Fakes for the measurement path: a clock the test controls, steps whose cost it sets ---------------------------


class FakeClock:
    """Stands in for time.perf_counter: time moves only when a fake step spends it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def spend(self, ms: float) -> None:
        self.now += ms / 1e3


class TimedWorld:
    """What the timed steps of `fake-timed` engines cost, call by call, and the order they ran in.

    `cost_ms[variant](n)` is the cost of that variant's n-th timed call (warm-up included);
    `shared_cost_ms(k)`, where set, is the cost of the k-th timed call of any variant (drift over time).
    """

    def __init__(self, cost_ms: dict[str, object] | None = None, graphed: bool = False, shared_cost_ms=None) -> None:
        self.clock = FakeClock()
        self.cost_ms = cost_ms or {}
        self.shared_cost_ms = shared_cost_ms
        self.graphed = graphed
        self.order: list[str] = []  # variant of every timed call, in order
        self.calls: dict[str, int] = {}

    def step(self, variant: str):
        def run() -> None:
            n = self.calls.get(variant, 0)
            self.calls[variant] = n + 1
            cost = self.shared_cost_ms(len(self.order)) if self.shared_cost_ms else self.cost_ms[variant](n)
            self.order.append(variant)
            self.clock.spend(cost)

        return TimingStep(run, graphed=self.graphed)


WORLD: TimedWorld | None = None  # set by a test (tests.fake_backend.WORLD = TimedWorld(...)) before run_study


class TimedEngine(FakeEngine):
    def __init__(self, scale: float, variant: str):
        super().__init__(scale)
        self.variant = variant

    def timing_step(self):
        assert WORLD is not None, "set tests.fake_backend.WORLD first"
        return WORLD.step(self.variant)


@register_backend
class FakeTimedBackend(FakeBackend):
    """The fake backend, with timed steps that spend time on WORLD's clock."""

    name = "fake-timed"

    def build(self, variant, calibration):
        result = super().build(variant, calibration)
        return BuildResult(TimedEngine(result.engine.scale, variant.name), result.variant)


@register_tracer
class OrphanTracer(FakeTracer):
    """The fake tracer, plus one kernel per call launched by another thread, outside every layer range."""

    name = "fake-orphans"

    def trace(self, run_once, calls, device, synchronize):
        records = super().trace(run_once, calls, device, synchronize)
        for call_range in [r for r in records.ranges if r.name.startswith("trt-inspect/call/")]:
            correlation = 10_000 + len(records.kernels)
            records.launches.append(Launch(correlation, 2, call_range.end))
            records.kernels.append(KernelRecord("orphan_kernel", call_range.end + 1, call_range.end + 2, correlation))
        return records
