"""Without a plan's estimate (a GPU study), the time left times each variant to go as the finished variants of its
own backend took, from the build order the study reports; while none of a variant's backend has finished, it gives
no figure. The order line keeps its data through copies. Expected figures come from the steps written here."""

from __future__ import annotations

import copy
import pickle

from inspector.build_order import BuildOrder
from inspector.eta import Estimate
from inspector.study import Progress

ORDER = BuildOrder({"fp32": "PyTorch", "fp16": "PyTorch", "e-fp16": "Engine", "e-fp8": "Engine", "e-fp8b": "Engine"})


def finished(eta: Estimate, now: list[float], steps: list[tuple[str, float]], first: int = 0) -> str:
    """Each (variant, seconds) built in turn, the first of them variant `first` (from 0) of 5; the line after the
    last."""
    line = ""
    for index, (name, seconds) in enumerate(steps, start=first):
        eta.update(Progress("build", f"building {name}", name, index, 5))
        now[0] += seconds
        line = eta.update(Progress("build", f"{name} built and traced", name, index + 1, 5))
    return line


def test_the_variants_to_go_wait_for_a_finished_variant_of_their_backend_then_take_its_time():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("setup", ORDER))
    line = finished(eta, now, [("fp32", 1.0), ("fp16", 1.0)])
    assert line == "2 of 5 variants done; the time left once one Engine variant has been built"  # not PyTorch's 1 s
    line = finished(eta, now, [("e-fp16", 30.0)], first=2)
    assert line == "3 of 5 variants done; about 1 min 00 s left for the rest, then the timing rounds"
    line = finished(eta, now, [("e-fp8", 10.0)], first=3)
    assert line == "4 of 5 variants done; about 20 s left for the rest, then the timing rounds"  # (30 + 10) / 2


def test_without_the_order_the_variants_to_go_take_the_average_of_those_done():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    line = finished(eta, now, [("fp32", 1.0), ("fp16", 3.0)])
    assert line == "2 of 5 variants done; about 6 s left for the rest, then the timing rounds"


def test_the_order_line_names_each_backends_run_of_variants_and_keeps_its_data_through_copies():
    assert ORDER == "variants, in build order: fp32, fp16 (PyTorch); e-fp16, e-fp8, e-fp8b (Engine)"
    for again in (copy.copy(ORDER), copy.deepcopy(ORDER), pickle.loads(pickle.dumps(ORDER))):
        assert isinstance(again, BuildOrder) and again == ORDER and again.backends == ORDER.backends
