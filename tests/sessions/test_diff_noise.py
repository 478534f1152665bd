"""`diff` flags a layer or group only outside both sessions' bands, and counts what it could not judge.

The sessions are the H200 session's layers with per-call times drawn here: two draws of the same noise
stand for a rerun (nothing may be flagged), one layer drawn 60 % slower for a lowering regression (it
must be flagged). Which layer is slower is known by construction, not computed by the code under test.
"""

from __future__ import annotations

import copy
import random
import re
import statistics
from pathlib import Path

import pytest
from scipy.stats import binom

from inspector.cli import main
from sessions.analyses.diff import Change, Family, SessionDiff, _neighbours, diff_sessions, moved_time
from sessions.analyses.groups import load_rules, role_of
from sessions.analyses.noise import Band
from sessions.documents import storage
from sessions.documents.model import Layer, Session
from sessions.reports.diff_report import diff_text
from tests.conftest import H200
from tests.sessions.latency_edits import moved

MAINJOB = H200 / "senet154-mainjob-warm.json"  # schema 2, one traced call: no per-call times stored


@pytest.fixture(scope="module")
def session() -> Session:
    """fp16's 20 slowest layers (each some % of the total, as a small CNN's are), without the kernel table."""
    loaded = storage.load(MAINJOB)
    fp16 = loaded.variant("fp16")
    fp16.layers = sorted(fp16.layers, key=lambda layer: -(layer.time_ms or 0.0))[:20]
    fp16.kernels = fp16.trace = None
    loaded.variants = [fp16]
    return loaded


def drawn(session: Session, seed: int, slowed: dict[str, float] | None = None, calls: int = 7, spread: float = 0.3,
          load: float = 1.0) -> Session:
    """A copy whose layers have `calls` per-call times: the stored time x lognormal noise (30 %, as on a loaded CPU).

    `load` multiplies every layer's time (a busier machine), `slowed` one layer's more.
    """
    rng = random.Random(seed)
    copied = copy.deepcopy(session)
    for layer in copied.variants[0].layers:
        if layer.time_ms is None:
            continue
        factor = load * (slowed or {}).get(layer.name, 1.0)
        layer.call_times_ms = [layer.time_ms * factor * rng.lognormvariate(0, spread) for _ in range(calls)]
        layer.time_ms = sum(layer.call_times_ms) / calls
    return copied


def time_regressions(diff: SessionDiff) -> set[tuple[str, str]]:
    return {(c.what, c.item) for c in diff.regressions if c.what in ("layer time", "group time")}


def test_reruns_of_noisy_layers_flag_nothing(session: Session) -> None:
    for seed in range(3):
        a, b = drawn(session, 2 * seed), drawn(session, 2 * seed + 1)
        diff = diff_sessions(a, b, load_rules())
        assert time_regressions(diff) == set()
        changed = [c for c in diff.changes if c.what == "layer time" and abs(c.relative or 0) > diff.threshold]
        assert changed  # the noise alone moves layers past the threshold: the bands, not the threshold, hold them


def test_a_slowed_layer_and_its_group_are_flagged(session: Session) -> None:
    rules = load_rules()
    layers = session.variants[0].layers
    slowed = max(layers, key=lambda layer: layer.time_ms or 0.0)  # tripled, it passes the 1 % floor of the total
    assert 2 * (slowed.time_ms or 0.0) > 0.01 * sum(layer.time_ms or 0.0 for layer in layers)
    diff = diff_sessions(drawn(session, 10), drawn(session, 11, {slowed.name: 3.0}), rules)
    assert {item for what, item in time_regressions(diff) if what == "layer time"} == {slowed.name}
    assert ("group time", role_of(slowed, rules)) in time_regressions(diff)


def test_layers_without_a_spread_are_counted_not_judged_and_left_to_the_threshold(session: Session) -> None:
    diff = diff_sessions(session, copy.deepcopy(session), load_rules())  # a stored session of one traced call
    timed = sum(1 for layer in session.variants[0].layers if layer.time_ms is not None)
    assert (f"fp16: layer times outside both sessions' bands flagged; 0 judged, {timed} not judged"
            in " ".join(diff.notes))
    half = drawn(session, 1)
    diff = diff_sessions(session, half, load_rules())  # one side with a spread is not enough
    assert f"0 judged, {timed} not judged" in " ".join(diff.notes)
    for c in (c for c in diff.changes if c.what == "layer time"):  # the threshold's word, no band's
        assert c.verdict == ("slower" if c.b > c.a * 1.05 else "faster" if c.b < c.a * 0.95 else None)
    shown = [line for line in diff_text(diff).splitlines() if " layer time " in line]
    assert shown and all("threshold only: no per-call spread stored" in line for line in shown)
    for change in (c for c in diff.changes if c.what == "layer time"):  # unjudged: the threshold alone decides
        assert isinstance(change.a, float) and isinstance(change.b, float)
        assert change.regression == (change.b > change.a * (1 + diff.threshold) and change.b - change.a >= 0.01 * sum(
            layer.time_ms or 0.0 for layer in session.variants[0].layers))
    judged = diff_text(diff_sessions(drawn(session, 2), drawn(session, 3), load_rules())).splitlines()
    assert any(" layer time " in line and "within noise" in line for line in judged)


def median_ratio(a: Session, b: Session) -> float:
    """The median of the paired layers' time ratios B / A, by name (both copies hold the same layers)."""
    return statistics.median(ratios(a, b))


def test_a_uniformly_slowed_variant_flags_no_layer_and_states_its_factor(session: Session) -> None:
    for seed in range(3):
        a, b = drawn(session, 20 + 2 * seed), drawn(session, 21 + 2 * seed, load=2.4)  # the load moved between sessions
        raw_slower = [ratio for ratio in ratios(a, b) if ratio > 1.6]
        assert len(raw_slower) > 10  # raw, most layers are 60 % slower or more: the factor, not the bands, holds them
        diff = diff_sessions(a, b, load_rules())
        assert time_regressions(diff) == set()
        stated = re.search(r"common factor B/A x([\d.]+) \(median of (\d+) paired layers' time ratios",
                           " ".join(diff.notes))
        assert stated and int(stated.group(2)) == 20
        assert float(stated.group(1)) == pytest.approx(median_ratio(a, b), rel=1e-3)


def test_a_layer_slowed_inside_a_uniformly_slowed_variant_is_flagged(session: Session) -> None:
    rules = load_rules()
    slowed = max(session.variants[0].layers, key=lambda layer: layer.time_ms or 0.0)
    flagged = 0
    for seed in range(8):
        a = drawn(session, 30 + 2 * seed)
        steady = diff_sessions(a, drawn(session, 31 + 2 * seed, {slowed.name: 3.0}), rules)
        loaded = diff_sessions(a, drawn(session, 31 + 2 * seed, {slowed.name: 3.0}, load=2.4), rules)
        layers = {item for what, item in time_regressions(loaded) if what == "layer time"}
        assert layers <= {slowed.name}
        assert time_regressions(loaded) == time_regressions(steady)  # the load shift changes no verdict
        flagged += layers == {slowed.name}
    assert flagged >= 6  # 3x within 30 % noise and 7 calls: caught in 7 of these 8 draws


def with_latency(session: Session, factor: float = 1.0, added_ms: float = 0.0, load: float | None = None) -> Session:
    """`session` with its latency samples and figures x `factor` + `added_ms` and `load` recorded."""
    latency = session.variants[0].latency
    assert latency is not None
    moved(latency, factor, added_ms)
    session.environment.load_average = [load, load, load] if load is not None else None
    return session


def diff_exit(a: Session, b: Session, tmp_path: Path) -> int:
    """`diff`'s exit code on the two sessions, through the CLI."""
    paths = [storage.save(x, tmp_path / f"{name}.json") for name, x in (("a", a), ("b", b))]
    return main(["diff", *map(str, paths), "--format", "json"])


def interval_of_median(values: list[float]) -> tuple[float, float]:
    """The 95 % interval of the median: the ranks k, n + 1 - k with P(Binomial(n, 1/2) <= k - 1) <= 2.5 %."""
    ordered = sorted(values)
    k = max(j for j in range(1, len(ordered) + 1) if j == 1 or binom.cdf(j - 1, len(ordered), 0.5) <= 0.025)
    return ordered[k - 1], ordered[len(ordered) - k]


def ratios(a: Session, b: Session) -> list[float]:
    """The paired layers' time ratios B / A, by name (both copies hold the same layers)."""
    times_a = {layer.name: layer.time_ms or 0.0 for layer in a.variants[0].layers}
    return [(layer.time_ms or 0.0) / times_a[layer.name] for layer in b.variants[0].layers]


def samples(session: Session) -> list[float]:
    latency = session.variants[0].latency
    assert latency is not None
    return latency.samples_ms


def latency_row(diff: SessionDiff) -> Change:
    return next(c for c in diff.changes if c.what == "latency")


def test_a_variant_slowed_as_a_whole_on_a_busier_machine_is_stated_not_judged(session: Session, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    cores = session.environment.cpu_count
    a = with_latency(drawn(session, 40), load=0.1 * cores)
    b = with_latency(drawn(session, 41, load=2.4), factor=2.4, load=2.0 * cores)
    low, high = interval_of_median(ratios(a, b))
    assert low <= 2.4 <= high  # the premise: the layers moved as the latency did
    diff = diff_sessions(a, b, load_rules())
    assert diff.regressions == []
    latency = statistics.median(samples(b)) / statistics.median(samples(a))
    assert latency_row(diff).note.startswith(
        f"slower by x{latency:.3g}, the factor every layer moved by (x{statistics.median(ratios(a, b)):.4g}, "
        f"95 % interval x{low:.4g}-x{high:.4g}), with the machine busier: load average per core 0.10 -> 2.00 "
        f"({cores} cores): not judged")
    assert diff_exit(a, b, tmp_path) == 0


@pytest.mark.parametrize("load_a, load_b", [(1.0, 1.2), (2.0, 0.1)])  # 0.2 per core: no material change; A busier
def test_a_variant_slowed_as_a_whole_without_a_busier_machine_is_a_regression(
        session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str], load_a: float, load_b: float) -> None:
    cores = session.environment.cpu_count
    a = with_latency(drawn(session, 40), load=load_a * cores)
    b = with_latency(drawn(session, 41, load=2.4), factor=2.4, load=load_b * cores)
    diff = diff_sessions(a, b, load_rules())
    assert {(c.what, c.item) for c in diff.regressions} == {("latency", "fp16")}
    assert latency_row(diff).verdict == "slower"
    assert diff_exit(a, b, tmp_path) == 1


def test_a_layer_slowed_tenfold_on_a_busier_machine_is_still_a_regression(session: Session, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    cores = session.environment.cpu_count
    slowed = max(session.variants[0].layers, key=lambda layer: layer.time_ms or 0.0)
    a = with_latency(drawn(session, 50), load=0.1 * cores)
    b = with_latency(drawn(session, 51, {slowed.name: 10.0}), added_ms=9 * (slowed.time_ms or 0.0), load=2.0 * cores)
    high = interval_of_median(ratios(a, b))[1]
    assert min(samples(b)) / max(samples(a)) > high  # the premise: the latency moved past every layer's factor
    diff = diff_sessions(a, b, load_rules())
    assert {(c.what, c.item) for c in diff.regressions if c.what in ("latency", "layer time")} == {
        ("latency", "fp16"), ("layer time", slowed.name)}
    assert diff_exit(a, b, tmp_path) == 1


def test_sessions_without_a_load_record_judge_the_latency_as_measured(session: Session) -> None:
    a = with_latency(drawn(session, 40))
    b = with_latency(drawn(session, 41, load=2.4), factor=2.4, load=3.0 * session.environment.cpu_count)
    diff = diff_sessions(a, b, load_rules())
    assert {(c.what, c.item) for c in diff.regressions} == {("latency", "fp16")}


def test_a_latency_that_moved_while_the_layers_did_not_is_judged(session: Session) -> None:
    cores = session.environment.cpu_count
    a = with_latency(drawn(session, 62), load=0.1 * cores)
    b = with_latency(drawn(session, 63), factor=1.06, load=2.0 * cores)
    low, high = interval_of_median(ratios(a, b))
    assert low <= 1 and 1.06 <= high  # the premise: the layers' interval holds both no move and the latency's
    diff = diff_sessions(a, b, load_rules())
    assert {(c.what, c.item) for c in diff.regressions} == {("latency", "fp16")}


def test_a_latency_within_noise_stays_within_noise_whatever_the_load(session: Session) -> None:
    cores = session.environment.cpu_count
    a, b = drawn(session, 70), drawn(session, 71, load=0.6)
    for copied in (a, b):
        samples(copied)[:] = [2.0, 3.0, 4.0, 5.0, 6.0] * 3  # wide: 5 rounds of 3, medians 3 to 5 ms
    a, b = with_latency(a, load=2.0 * cores), with_latency(b, factor=0.9, load=0.1 * cores)
    low, high = interval_of_median(ratios(a, b))
    # the premise: all else would attribute it (B less busy, the layers faster, the latency's ratio range meets theirs)
    assert high < 1 and min(samples(b)) / max(samples(a)) <= high and max(samples(b)) / min(samples(a)) >= low
    diff = diff_sessions(a, b, load_rules())
    assert latency_row(diff).verdict == "within noise" and latency_row(diff).note.startswith("within noise")


def one_process_band(latency_samples: list[float], rounds: list[float]) -> tuple[float, float]:
    """What one study's band holds: the median's 95 % interval, widened to the round medians' range."""
    low, high = interval_of_median(latency_samples)
    return min(low, *rounds), max(high, *rounds)


@pytest.mark.parametrize("factor", [1.004, 1 / 1.004])  # 0.4 %: two processes of unchanged code were seen 0.56 % apart
def test_a_latency_moved_less_than_two_processes_differ_is_within_noise_though_one_process_bands_part(
        session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str], factor: float) -> None:
    a, b = with_latency(drawn(session, 80)), with_latency(drawn(session, 81), factor=factor)
    band_a = one_process_band(samples(a), a.variants[0].latency.round_medians_ms)
    band_b = one_process_band(samples(b), b.variants[0].latency.round_medians_ms)
    assert band_a[1] < band_b[0] or band_b[1] < band_a[0]  # the premise: each process's own bands do not meet
    row = latency_row(diff_sessions(a, b, load_rules()))
    assert row.verdict == "within noise" and "for another process" in row.note
    assert diff_exit(a, b, tmp_path) == 0


@pytest.mark.parametrize("factor, exit_code", [(1.015, 0), (1.10, 1)])  # slower; past the 5 % threshold too
def test_a_latency_moved_further_than_two_processes_differ_is_called(
        session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str], factor: float, exit_code: int) -> None:
    a, b = with_latency(drawn(session, 82)), with_latency(drawn(session, 83), factor=factor)
    row = latency_row(diff_sessions(a, b, load_rules()))
    assert row.verdict == "slower" and row.regression == (exit_code == 1)
    assert diff_exit(a, b, tmp_path) == exit_code


def test_the_load_explains_a_latency_only_as_far_as_each_sessions_own_band_moved_with_its_layers(
        session: Session) -> None:
    """Layers 2 % slower on a busier machine, the latency 3 %: the 1 % the layers do not explain is judged, however
    far another process might land (the layers' factor already holds what the process moved)."""
    cores = session.environment.cpu_count
    a = with_latency(drawn(session, 90, spread=0.003), load=0.1 * cores)
    b = with_latency(drawn(session, 91, spread=0.003, load=1.02), factor=1.03, load=2.0 * cores)
    low, high = interval_of_median(ratios(a, b))
    assert 1 < low and high < 1.025  # the premise: every layer moved, by less than the latency
    band_a = one_process_band(samples(a), a.variants[0].latency.round_medians_ms)
    band_b = one_process_band(samples(b), b.variants[0].latency.round_medians_ms)
    assert band_b[0] / high > band_a[1] * 1.005  # ... and the latency's own band moved past theirs by more than 0.5 %
    row = latency_row(diff_sessions(a, b, load_rules()))
    assert row.verdict == "slower" and not row.regression and "not judged" not in row.note


@pytest.mark.parametrize("threshold, warned", [(0.005, True), (0.05, False)])
def test_a_threshold_under_what_two_processes_differ_by_is_said_to_catch_nothing_smaller(
        session: Session, threshold: float, warned: bool) -> None:
    warnings = diff_sessions(session, copy.deepcopy(session), load_rules(), threshold=threshold).warnings
    assert any(w.startswith(f"threshold {threshold * 100:g}% is under") for w in warnings) == warned


def test_a_diff_says_where_a_samples_inferences_differ(session: Session):
    """A session whose samples are single inferences against one whose samples are means of two: the diff warns for
    that variant only, since its bands and percentiles mean something else."""
    b = copy.deepcopy(session)
    name = b.variants[0].name
    b.variants[0].latency.inferences_per_sample = 2
    warnings = diff_sessions(session, b, load_rules(None)).warnings
    about = [w for w in warnings if "a sample is the mean of" in w]
    assert len(about) == 1 and about[0].startswith(f"{name}:") and "1 inference(s) in A, 2 in B" in about[0]
    assert not [w for w in diff_sessions(session, copy.deepcopy(session), load_rules(None)).warnings
                if "a sample is the mean of" in w]


def test_a_diff_warns_where_the_timed_region_is_described_otherwise_by_the_same_clock(session: Session):
    """The same clock around a region described in other words (another discard after a switch, say): a warning;
    the same words but for their line breaks: none."""
    def warned(a: Session, b: Session) -> list[str]:
        return [w for w in diff_sessions(a, b, load_rules(None)).warnings if "describe the timed region" in w]

    other, rewrapped = copy.deepcopy(session), copy.deepcopy(session)
    other.method.timed_region += "; each after 250 ms discarded"
    rewrapped.method.timed_region = rewrapped.method.timed_region.replace(" ", "\n", 1)
    assert len(warned(session, other)) == 1
    assert warned(session, rewrapped) == [] and warned(session, copy.deepcopy(session)) == []


def test_a_diff_warns_where_the_gpu_states_differ(session: Session):
    """A session timed after the GPU state was settled against one that records no state, or one whose helper failed:
    a warning naming both kinds; two sessions of one kind, whatever their words: none."""
    from sessions.documents.vocab import GPU_STATE_NOT_SETTLED, GPU_STATE_SETTLED

    def warned(a: Session, b: Session) -> list[str]:
        return [w for w in diff_sessions(a, b, load_rules(None)).warnings if "graph state" in w]

    settled, failed, failed_otherwise = (copy.deepcopy(session) for _ in range(3))
    settled.environment.gpu_state = GPU_STATE_SETTLED
    failed.environment.gpu_state = f"{GPU_STATE_NOT_SETTLED}the helper process failed (exit 7)"
    failed_otherwise.environment.gpu_state = f"{GPU_STATE_NOT_SETTLED}the helper process did not end within 60 s"
    assert warned(session, settled) == ["different CUDA-graph state: not recorded against settled"]
    assert warned(settled, failed) == ["different CUDA-graph state: settled against not settled"]
    assert warned(failed, failed_otherwise) == [] and warned(settled, copy.deepcopy(settled)) == []


def test_a_diff_warns_where_one_side_replayed_cuda_graphs_and_the_other_launched_from_the_host(session: Session):
    """trtexec with and without --useCudaGraph: the host's launch time is in one latency only; unknown on either side
    (files without trtexec's options) or the same on both: no warning."""
    def warned(a: Session, b: Session) -> list[str]:
        return [w for w in diff_sessions(a, b, load_rules(None)).warnings if "launch time" in w]

    graphed, eager, unknown = (copy.deepcopy(session) for _ in range(3))
    graphed.method.cuda_graph, eager.method.cuda_graph, unknown.method.cuda_graph = True, False, None
    assert warned(graphed, eager) == [("A replayed CUDA graphs, B launched every kernel from the host: the host's "
                                       "launch time is in one side's latency only")]
    assert len(warned(eager, graphed)) == 1 and warned(eager, graphed)[0].startswith("A launched every kernel")
    assert warned(graphed, unknown) == warned(unknown, eager) == warned(eager, copy.deepcopy(eager)) == []
    eager.study.device = "cpu"  # a CPU study launches no kernels at all: the device line says what differs
    assert warned(graphed, eager) == []


def test_a_diff_of_a_gpu_session_against_a_cpu_session_says_the_devices_differ(session: Session):
    cpu = copy.deepcopy(session)
    cpu.study.device = "cpu"
    warnings = diff_sessions(session, cpu, load_rules(None)).warnings
    assert "different device: cuda against cpu" in warnings
    assert not [w for w in diff_sessions(session, copy.deepcopy(session), load_rules(None)).warnings if "device" in w]


def _band(ms: float, spread: float = 0.05) -> Band:
    return Band(ms, ms * (1 - spread), ms * (1 + spread), "constructed")


def _timed(a: float, b: float) -> tuple[float, float, Band, Band]:
    return a, b, _band(a), _band(b)


LAYERS = [Layer(name=n, kind="Conv2d") for n in ("stem", "block", "block.conv1", "block.conv3", "head")]


@pytest.mark.parametrize("timed, moved", [
    # the child gains what its block loses (an unchanged rerun's attribution): stated
    ({"block": _timed(1.0, 0.3), "block.conv3": _timed(2.8, 3.5), "stem": _timed(5, 5), "head": _timed(1, 1)},
     "block"),
    # the layer after it loses it instead
    ({"block.conv3": _timed(2.8, 3.5), "head": _timed(1.0, 0.35), "block": _timed(1, 1)}, "head"),
    # slowed tenfold alone: no neighbour lost anything like it
    ({"block.conv3": _timed(2.8, 28.0), "block": _timed(1.0, 0.3), "head": _timed(1, 1)}, None),
    # a neighbour lost under half of the gain (bands wide enough that the two together are not slower)
    ({"block.conv3": (2.8, 3.5, _band(2.8, 0.3), _band(3.5, 0.3)), "block": (1.0, 0.8, _band(1.0, 0.3),
                                                                             _band(0.8, 0.3)), "head": _timed(1, 1)},
     None),
    # a neighbour lost enough, but the two together are slower than their bands allow
    ({"block.conv3": _timed(2.8, 5.0), "block": _timed(2.0, 0.8), "head": _timed(1, 1)}, None),
    # the loss is in a layer neither next to it nor holding it
    ({"block.conv3": _timed(2.8, 3.5), "stem": _timed(1.0, 0.3), "block": _timed(1, 1), "head": _timed(1, 1)}, None),
    # a tiny layer slowed tenfold beside a large one whose dip is no change of its own (3 %, under the threshold)
    ({"block.conv3": (0.1, 1.0, _band(0.1, 0.01), _band(1.0, 0.01)), "block": (20.0, 19.4, _band(20.0, 0.01),
                                                                              _band(19.4, 0.01)), "head": _timed(1, 1)},
     None),
    # the parent's loss lies within its own band: no change of its own
    ({"block.conv3": _timed(2.8, 3.5), "block": (1.0, 0.3, _band(1.0, 0.9), _band(0.3, 0.9)), "head": _timed(1, 1)},
     None),
])
def test_a_layer_that_gains_what_a_neighbour_loses_is_time_moved_not_a_regression(timed, moved):
    found = moved_time(LAYERS, 3, timed, 0.05, {}, Family.of(timed))
    assert (found is None) == (moved is None)
    if moved is not None:
        assert found.startswith(f"time moved from {moved} ")


def test_time_moved_between_adjacent_layers_of_a_rerun_is_stated_and_a_tenfold_slowdown_still_flagged(session):
    base = drawn(session, 1, spread=0.01)
    layers = base.variants[0].layers
    moved = copy.deepcopy(base)
    giver, taker = moved.variants[0].layers[4], moved.variants[0].layers[5]  # adjacent in the variant's order
    share = 0.3 * giver.time_ms
    giver.call_times_ms = [t - share for t in giver.call_times_ms]
    taker.call_times_ms = [t + share for t in taker.call_times_ms]
    giver.time_ms, taker.time_ms = giver.time_ms - share, taker.time_ms + share
    assert share / layers[5].time_ms > 0.05  # the premise: the taker gains past the threshold
    diff = diff_sessions(base, moved, load_rules())
    assert not diff.regressions
    (stated,) = [c for c in diff.changes if c.item == taker.name and c.what == "layer time"]
    assert stated.note.startswith(f"time moved from {giver.name} ")
    slowed = drawn(session, 1, spread=0.01, slowed={layers[5].name: 10.0})
    assert [c.item for c in diff_sessions(base, slowed, load_rules()).regressions if c.what == "layer time"] == [
        layers[5].name]


def test_one_neighbours_loss_excuses_no_more_than_itself():
    """conv2 loses 1 ms; conv1 and conv3 around it each gain 1 ms: one of them took conv2's time, the other did not."""
    layers = [Layer(name=n, kind="Conv2d") for n in ("conv1", "conv2", "conv3")]
    timed = {"conv1": _timed(3.0, 4.0), "conv2": _timed(3.0, 2.0), "conv3": _timed(3.0, 4.0)}
    spent: dict[str, float] = {}
    found = [moved_time(layers, k, timed, 0.05, spent, Family.of(timed)) for k in (0, 2)]
    assert found[0] is not None and found[0].startswith("time moved from conv2 ") and found[1] is None


def test_only_the_nearest_timed_parent_and_children_are_neighbours():
    layers = [Layer(name=n, kind="Conv2d") for n in ("net", "net.a", "net.a.conv", "net.b")]
    timed = {n.name: _timed(1.0, 1.0) for n in layers}
    family = Family.of(timed)
    assert set(_neighbours(layers, 2, timed, family)) == {"net.a", "net.b"}  # its parent, the next row; never `net`
    assert set(_neighbours(layers, 0, timed, family)) == {"net.a", "net.b"}  # its children's rows, not its grandchild's


def test_without_a_spread_no_time_is_said_to_have_moved():
    """A profile's averages (no per-call spread): a tiny layer 21 times slower beside a 20 ms layer 5.5 % faster is
    judged, not excused."""
    layers = [Layer(name=n, kind="Conv2d") for n in ("big", "tiny")]
    timed = {"big": (20.0, 18.9, None, None), "tiny": (0.1, 2.1, None, None)}
    assert moved_time(layers, 1, timed, 0.05, {}, Family.of(timed)) is None
    timed["big"] = (20.0, 18.9, _band(20.0, 0.01), _band(18.9, 0.01))  # the big one has a spread, the tiny one not
    assert moved_time(layers, 1, timed, 0.05, {}, Family.of(timed)) is None
    timed = {"big": (20.0, 18.9, None, None), "tiny": (0.1, 2.1, _band(0.1, 0.01), _band(2.1, 0.01))}  # and not
    assert moved_time(layers, 1, timed, 0.05, {}, Family.of(timed)) is None


@pytest.mark.parametrize("gains", [(0.5, 1.0), (0.6, 0.6)])
def test_what_is_left_of_a_loss_is_all_a_second_gain_may_take(gains):
    """A loss of 1 ms beside two gains that together exceed it: the first is excused, the second is judged with what
    the first took added back to the neighbour."""
    layers = [Layer(name=n, kind="Conv2d") for n in ("block.conv1", "block", "block.conv3")]
    first, second = gains
    tight = lambda a, b: (a, b, _band(a, 0.01), _band(b, 0.01))  # noqa: E731
    timed = {"block.conv1": tight(3.0, 3.0 + first), "block": tight(5.0, 4.0), "block.conv3": tight(3.0, 3.0 + second)}
    spent: dict[str, float] = {}
    assert moved_time(layers, 0, timed, 0.05, spent, Family.of(timed)) is not None
    assert moved_time(layers, 2, timed, 0.05, spent, Family.of(timed)) is None
