import itertools
import math
import random
from collections.abc import Callable

import pytest

from profilers.stats import latency_stats, percentile


def test_nearest_rank_percentiles_and_cov():
    samples = [float(x) for x in range(1, 101)]  # 1..100
    random.Random(0).shuffle(samples)
    stats = latency_stats(samples)
    assert stats.min_ms == 1 and stats.max_ms == 100
    assert stats.median_ms == 50.5
    assert stats.p90_ms == 90 and stats.p99_ms == 99
    assert stats.mean_ms == pytest.approx(50.5)
    assert stats.std_ms == pytest.approx(math.sqrt((100**2 - 1) / 12))
    assert stats.cov == pytest.approx(stats.std_ms / 50.5)
    assert stats.samples_ms == samples  # order kept: rounds stay readable


def test_odd_count_median_and_single_sample():
    assert latency_stats([3.0, 1.0, 2.0]).median_ms == 2.0
    one = latency_stats([4.0])
    assert (one.p99_ms, one.cov) == (4.0, 0.0)


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        latency_stats([])
    with pytest.raises(ValueError):
        percentile([], 50)


def test_round_medians_and_their_cov():
    samples = [1.0, 1.1, 1.0, 2.0, 2.0, 2.2]  # two rounds of three
    stats = latency_stats(samples, per_round=3)
    assert stats.round_medians_ms == [1.0, 2.0]
    assert stats.round_cov == pytest.approx(0.5 / 1.5)
    assert latency_stats(samples).round_cov is None
    assert latency_stats(samples[:3], per_round=3).round_cov is None  # one round: no run-to-run figure


class SwitchingClock:
    """A fake clock and steps: each inference takes 1 ms, 1.3 ms right after another variant ran."""

    def __init__(self):
        self.now = 0.0
        self.last = None

    def perf_counter(self):
        return self.now

    def step(self, name):
        def run():
            self.now += (1.3e-3 if self.last != name else 1.0e-3)
            self.last = name
        return run


@pytest.mark.parametrize("discard, clean", [(1, True), (0, False)])
def test_warmup_after_each_switch_keeps_cold_samples_out(monkeypatch, discard, clean):
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    clock = SwitchingClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock.perf_counter)
    plan = TimingPlan(warmup_s=0, rounds=4, iters=5, switch_warmup=discard)
    samples = timing.measure({"a": clock.step("a"), "b": clock.step("b")}, plan, timing.HostClock())
    for values in samples.values():
        stats = latency_stats(values, plan.iters)
        assert len(values) == 20
        assert (stats.max_ms == pytest.approx(1.0)) is clean
        assert (stats.cov < 0.003) is clean  # the H200 target: per-sample CoV <= 0.3 %


class QueuedGpu:
    """One stream as a GPU runs it: a launch costs host time, work runs in order once the device is free,
    an event's time is when the stream reaches it, synchronising waits for the stream to drain."""

    def __init__(self, launch_ms: float, work_ms: float) -> None:
        self.launch_ms, self.work_ms = launch_ms, work_ms
        self.host = self.free_at = 0.0

    def step(self) -> None:
        self.host += self.launch_ms
        self.free_at = max(self.host, self.free_at) + self.work_ms

    def synchronize(self) -> None:
        self.host = max(self.host, self.free_at)

    def new_event(self):
        gpu = self

        class Event:
            at = 0.0

            def record(self) -> None:
                self.at = max(gpu.host, gpu.free_at)

            def synchronize(self) -> None:
                gpu.synchronize()

            def elapsed_time(self, end) -> float:
                return end.at - self.at

        return Event()


def test_no_sample_holds_the_launch_gap_of_a_drained_stream(monkeypatch):
    """A CUDA-graph replay takes host time to launch (about 1.2 ms for senet154's 1,636 kernels): a round
    that starts on a drained stream times that gap in its first sample (p99 1.19 x median on the H200)."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = QueuedGpu(launch_ms=1.2, work_ms=4.9)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    clock = timing.EventClock(gpu.new_event, gpu.synchronize)
    plan = TimingPlan(warmup_s=0.05, rounds=3, iters=20, switch_warmup=2)
    samples = timing.measure({"a": gpu.step, "b": gpu.step}, plan, clock)
    for values in samples.values():
        assert len(values) == 60
        assert max(values) == pytest.approx(4.9)


class ColdAfterSwitchGpu(QueuedGpu):
    """A stream whose inferences run `slow` times longer for the first `cold_ms` of GPU time after a switch of variant
    (as an H100 ran a short model's first samples of a round up to 1.7x slow:
    benchmarks/results/h100/figures/round-start-spikes.txt)."""

    def __init__(self, launch_ms: float, work_ms: float, cold_ms: float, slow: float) -> None:
        super().__init__(launch_ms, work_ms)
        self.base, self.cold_ms, self.slow = work_ms, cold_ms, slow
        self.last: str | None = None
        self.cold_until = 0.0

    def variant(self, name: str) -> Callable[[], None]:
        def step() -> None:
            starts = max(self.host + self.launch_ms, self.free_at)
            if name != self.last:
                self.last, self.cold_until = name, starts + self.cold_ms
            self.work_ms = self.base * (self.slow if starts < self.cold_until else 1.0)
            self.step()

        return step


@pytest.mark.parametrize("work_ms, cold_ms, slow, discard", [
    (0.3, 20.0, 1.5, 5), (2.5, 20.0, 1.5, 5), (0.3, 200.0, 1.02, 5), (1.5, 200.0, 1.02, 5), (3.7, 200.0, 1.02, 5),
    (0.3, 400.0, 1.02, 100), (100.0, 400.0, 1.02, 5)])
def test_the_samples_after_a_switch_are_past_what_the_switch_left_whatever_a_models_length(monkeypatch, work_ms,
                                                                                          cold_ms, slow, discard):
    """The discard after a switch is counted in samples, so a short model's lasts as long as a long one's (an H100
    ran a short model's first 20 ms of a round up to 1.7x slow: 5 samples of 14 inferences of 0.3 ms, or of 2 of
    2.5 ms, run 21 or 25 ms, where 5 inferences ran 1.5 or 12.5 ms), and on a GPU it lasts at least 250 ms (an H100
    ran a variant at the speed the variant before had left it in for about 40-370 ms, most often under 200 ms: 5
    samples' worth lasts 20-37 ms); where the samples' worth lasts longer than that, all of it (100 samples of 14
    inferences of 0.3 ms: 420 ms; 5 of one 100 ms inference: 500 ms)."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = ColdAfterSwitchGpu(launch_ms=0.01, work_ms=work_ms, cold_ms=cold_ms, slow=slow)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    clock = timing.EventClock(gpu.new_event, gpu.synchronize)
    plan = TimingPlan(warmup_s=0.05, rounds=3, iters=20, switch_warmup=discard)
    samples = timing.measure({"a": gpu.variant("a"), "b": gpu.variant("b")}, plan, clock)
    for values in samples.values():
        assert len(values) == 60
        assert max(values) == pytest.approx(work_ms)


def test_a_gpus_discard_is_the_samples_worth_or_the_floor_whichever_is_longer_and_none_where_none_is_asked():
    from profilers import timing

    assert timing.inferences_per_sample(1.0) == 4
    assert timing.discard_inferences(0, 4, 1.0) == 0
    assert timing.discard_inferences(5, 4, 1.0) == 250  # 250 ms of 1 ms inferences, past 5 x 4
    assert timing.discard_inferences(100, 4, 1.0) == 400
    assert timing.discard_inferences(5, 16, 0.0001) == 10_000  # 2.5 million past the floor: the most
    assert timing.discard_inferences(3, 1, None) == 3  # the host's clock sizes nothing: samples' worth
    assert timing.inferences_per_sample(None) == 1
    gpu = QueuedGpu(launch_ms=0.01, work_ms=1.0)
    assert timing.EventClock(gpu.new_event, gpu.synchronize).inference_ms(gpu.step) == pytest.approx(1.0)
    assert timing.HostClock().inference_ms(gpu.step) is None


def test_rounds_alternate_their_order_and_every_turn_discards_past_the_floor(monkeypatch):
    """Rounds A B C, C B A, A B C: a round opens on the variant the round before closed on, and there too 250 ms are
    discarded (4 inferences of 1 ms a sample, 1 sample's worth), as at a switch; the study's first turn discards
    1000 ms."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = QueuedGpu(launch_ms=0.01, work_ms=1.0)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    ran: list[str] = []

    def variant(name: str) -> Callable[[], None]:
        def step() -> None:
            ran.append(name)
            gpu.step()

        return step

    plan = TimingPlan(warmup_s=0, rounds=3, iters=2, switch_warmup=1)
    timing.measure({name: variant(name) for name in "abc"}, plan, timing.EventClock(gpu.new_event, gpu.synchronize))
    runs = [(name, len(list(group))) for name, group in itertools.groupby(ran)]
    warm = 1 + timing.SIZING_INFERENCES  # the warm-up's one inference (no time asked), then the sizing
    turn = 250 + 2 * 4
    assert runs == [("a", warm), ("b", warm), ("c", warm),
                    ("a", 1000 + 2 * 4), ("b", turn), ("c", 2 * turn),
                    ("b", turn), ("a", 2 * turn), ("b", turn), ("c", turn)]


def test_a_lone_variant_discards_the_floor_at_every_round(monkeypatch):
    """A warm-up synchronises after every inference, and a round is reported while the GPU idles: 250 ms of
    back-to-back inferences before each round's samples (1000 ms before the first), even where one variant is
    timed."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = QueuedGpu(launch_ms=0.01, work_ms=1.0)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    calls = 0

    def step() -> None:
        nonlocal calls
        calls += 1
        gpu.step()

    plan = TimingPlan(warmup_s=0, rounds=3, iters=2, switch_warmup=1)
    timing.measure({"a": step}, plan, timing.EventClock(gpu.new_event, gpu.synchronize))
    assert calls == 1 + timing.SIZING_INFERENCES + 1000 + 2 * 250 + 3 * 2 * 4


class ColdAfterIdleGpu(QueuedGpu):
    """A stream whose inferences run `slow` times longer for the first `cold_ms` of GPU time after the stream idled
    for more than `idle_ms` (as an H100 left idle for 50 ms ran a short model up to 0.9 % slower for over 100 ms after
    it: benchmarks/results/h100/floor-every-turn/idle-lag.txt)."""

    def __init__(self, launch_ms: float, work_ms: float, idle_ms: float, cold_ms: float, slow: float) -> None:
        super().__init__(launch_ms, work_ms)
        self.base, self.idle_ms, self.cold_ms, self.slow = work_ms, idle_ms, cold_ms, slow
        self.cold_until = 0.0

    def step(self) -> None:
        starts = max(self.host + self.launch_ms, self.free_at)
        if starts - self.free_at > self.idle_ms:
            self.cold_until = starts + self.cold_ms
        self.work_ms = self.base * (self.slow if starts < self.cold_until else 1.0)
        super().step()


@pytest.mark.parametrize("work_ms", [0.3, 0.45, 1.7, 3.7])
def test_no_round_holds_what_the_pause_before_it_left_a_short_model_in(monkeypatch, work_ms):
    """Each round is reported between the rounds (here 30 ms of host time, the GPU idle): the samples of the round
    that opens on the variant the round before closed on are past the 100 ms the idle GPU runs slow after it."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = ColdAfterIdleGpu(launch_ms=0.01, work_ms=work_ms, idle_ms=5.0, cold_ms=100.0, slow=1.008)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)

    def reported(_index: int, _samples: dict[str, list[float]]) -> None:
        gpu.host += 30.0

    plan = TimingPlan(warmup_s=0.05, rounds=4, iters=25, switch_warmup=5)
    samples = timing.measure({"a": gpu.step, "b": gpu.step}, plan, timing.EventClock(gpu.new_event, gpu.synchronize),
                             on_round=reported)
    for values in samples.values():
        assert len(values) == 100
        assert max(values) == pytest.approx(work_ms)


class ColdFromTheStartGpu(QueuedGpu):
    """A stream whose inferences run `slow` times longer until it has run `cold_ms` of back-to-back work, a gap of
    more than `idle_ms` between two inferences starting the count again: a GPU that idled for seconds while a study
    made its graphs, then ran only synchronised single inferences (the warm-ups, the sizing)."""

    def __init__(self, launch_ms: float, work_ms: float, idle_ms: float, cold_ms: float, slow: float) -> None:
        super().__init__(launch_ms, work_ms)
        self.base, self.idle_ms, self.cold_ms, self.slow = work_ms, idle_ms, cold_ms, slow
        self.busy_since: float | None = None

    def step(self) -> None:
        starts = max(self.host + self.launch_ms, self.free_at)
        if self.busy_since is None or starts - self.free_at > self.idle_ms:
            self.busy_since = starts
        self.work_ms = self.base * (self.slow if starts - self.busy_since < self.cold_ms else 1.0)
        super().step()


@pytest.mark.parametrize("work_ms", [0.3, 0.45, 1.7, 3.7])
def test_the_first_round_is_past_what_a_gpu_left_idle_before_the_study_runs_slow_for(monkeypatch, work_ms):
    """The study's first turn follows seconds of a GPU all but idle; here it runs slow for its first 600 ms of
    back-to-back work, each warm-up inference's synchronisation (0.05 ms on the host) starting the count again. No
    sample holds that, the first round's included, for a short model or a long one (with 250 ms at the first turn,
    every sample of that turn did)."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = ColdFromTheStartGpu(launch_ms=0.01, work_ms=work_ms, idle_ms=0.02, cold_ms=600.0, slow=1.008)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    real_synchronize = gpu.synchronize

    def synchronize() -> None:
        real_synchronize()
        gpu.host += 0.05

    plan = TimingPlan(warmup_s=0.05, rounds=4, iters=25, switch_warmup=5)
    samples = timing.measure({"a": gpu.step, "b": gpu.step}, plan, timing.EventClock(gpu.new_event, synchronize))
    for values in samples.values():
        assert len(values) == 100
        assert max(values) == pytest.approx(work_ms)


class AlternatingGpu(QueuedGpu):
    """A stream whose inferences alternate between `work_ms` plus and minus `jitter_ms` (the GPU's own jitter)."""

    def __init__(self, launch_ms: float, work_ms: float, jitter_ms: float) -> None:
        super().__init__(launch_ms, work_ms)
        self.base, self.jitter, self.count = work_ms, jitter_ms, 0

    def step(self) -> None:
        self.count += 1
        self.work_ms = self.base + (self.jitter if self.count % 2 else -self.jitter)
        super().step()


@pytest.mark.parametrize("work_ms, spans", [(0.25, 16), (0.5, 8), (1.0, 4), (2.5, 2), (5.0, 1), (0.01, 16)])
def test_a_gpu_sample_spans_inferences_lasting_four_milliseconds(monkeypatch, work_ms, spans):
    """A short model's sample is the mean of enough back-to-back inferences to last 4 ms (at most 16): counts
    worked out by hand (ceil(4 / the median of five single inferences, the work plus its 4 % jitter))."""
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    gpu = AlternatingGpu(launch_ms=0.001, work_ms=work_ms, jitter_ms=work_ms * 0.04)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: gpu.host / 1e3)
    clock = timing.EventClock(gpu.new_event, gpu.synchronize)
    sized: dict[str, int] = {}
    samples = timing.measure({"a": gpu.step}, TimingPlan(warmup_s=0.01, rounds=2, iters=10, switch_warmup=1), clock,
                             on_sized=sized.update)
    assert sized == {"a": spans}
    assert len(samples["a"]) == 20
    if spans % 2 == 0:  # an even count of alternating inferences: every sample is the mean work exactly
        assert samples["a"] == pytest.approx([work_ms] * 20)


def test_the_host_clock_times_one_forward_pass_per_sample(monkeypatch):
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    clock = SwitchingClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock.perf_counter)
    sized: dict[str, int] = {}
    timing.measure({"a": clock.step("a")}, TimingPlan(warmup_s=0, rounds=1, iters=3, switch_warmup=0),
                   timing.HostClock(), on_sized=sized.update)
    assert sized == {"a": 1}


def test_the_garbage_collector_is_off_while_the_rounds_run_and_back_after():
    import gc

    from profilers import timing
    from sessions.documents.plan import TimingPlan

    seen: list[bool] = []
    assert gc.isenabled()
    timing.measure({"a": lambda: seen.append(gc.isenabled())}, TimingPlan(warmup_s=0, rounds=2, iters=3,
                                                                         switch_warmup=1), timing.HostClock())
    assert len(seen) >= 2 * (3 + 1) and not any(seen)  # every inference of every round ran with it off
    assert gc.isenabled()


def test_garbage_made_between_rounds_is_collected_before_the_next_round():
    import weakref

    from profilers import timing
    from sessions.documents.plan import TimingPlan

    class Node:
        """An object in a reference cycle: only the cyclic collector frees it."""

    alive: list[bool] = []
    made: list[weakref.ref] = []

    def on_round(index: int, samples: dict) -> None:
        alive.extend(ref() is not None for ref in made)
        node = Node()
        node.me = node  # type: ignore[attr-defined]
        made[:] = [weakref.ref(node)]

    timing.measure({"a": lambda: None}, TimingPlan(warmup_s=0, rounds=3, iters=2, switch_warmup=0),
                   timing.HostClock(), on_round=on_round)
    assert alive == [False, False]  # each round's cycle was gone by the next round's report


def test_the_gpus_default_rounds_give_each_order_of_the_variants_the_same_weight_and_100_samples():
    """On a GPU a variant still runs at a level its neighbour before it leaves for a while after the discard (an H100's
    PyTorch fp16 alternated by up to 0.6 % with its order), so the default rounds run as many in one order as in the
    other; and a variant gets at least 100 samples, which put its median within about 0.02 % (docs/evidence.md)."""
    from profilers import timing
    from sessions.documents.options import machine_default

    rounds, iters = machine_default("rounds", "cuda"), machine_default("iters", "cuda")
    names = ["a", "b", "c"]
    orders = [tuple(timing.round_order(names, index)) for index in range(rounds)]
    assert orders.count(tuple(names)) == orders.count(tuple(reversed(names))) > 0
    assert rounds * iters >= 100


def test_a_gpu_studys_method_words_name_the_discards_floor_only_where_a_discard_is_asked():
    from profilers import timing
    from sessions.documents.plan import TimingPlan

    asked = timing.describe("cuda", True, TimingPlan(warmup_s=0.2, rounds=5, iters=20, switch_warmup=5))
    none = timing.describe("cuda", True, TimingPlan(warmup_s=0.2, rounds=5, iters=20, switch_warmup=0))
    assert ("discarding the inferences of 5 sample(s), lasting at least 250 ms (the first round's first turn at least "
            "1000 ms);") in asked
    assert "5 interleaved rounds in alternating order (A B C, then C B A) of 20 samples" in asked
    assert "lasting at least" not in none
    cpu = timing.describe("cpu", False, TimingPlan(0.5, 3, 5, 1))
    assert "lasting at least" not in cpu
    assert "3 interleaved rounds in alternating order (A B C, then C B A) of 5 inferences" in cpu
