"""What the user asked for on the command line, before anything about this machine is known.

`inspector.resolve` turns a request into a concrete `StudyPlan`; both front ends (CLI and TUI)
hold a request, never argv.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from sessions.errors import InputError
from sessions.plan import TimingPlan, parse_variants

BACKEND_CHOICES = ("auto", "torch", "tensorrt")
NAME_LIMIT = 200  # UTF-8 bytes; a name becomes part of a file name (255 bytes at most on most file systems)
TRACER_CHOICES = ("auto", "cupti", "torch", "none")

# Timing defaults. On the H200 a CUDA-graph sample varies by 0.06-0.17 % (tests/data/h200/mainjob-stats.txt):
# 5 rounds of 20 put the median within about 0.02 %, and the rounds show drift; more samples only cost time.
# The warm-up per variant is trtexec's default (200 ms): the GPU is busy from the quality checks on. The
# inferences discarded at every switch only have to queue ahead of the round's first event (no sample starts
# on an idle GPU) and bring the new graph's data into the caches: the first round's median lies within 0.1 %
# of the later rounds' for every variant (same file). Measured with the PyTorch backend's CUDA graphs; TensorRT
# engines and eager fallbacks use the same defaults unmeasured (their sessions' round medians show it).
CUDA_TIMING = TimingPlan(warmup_s=0.2, rounds=5, iters=20, switch_warmup=5)
CPU_TIMING = TimingPlan(warmup_s=0.5, rounds=3, iters=5, switch_warmup=1)
# Traced eager calls per variant: each layer's and group's time per call, and the spread `sessions.noise` judges
# them by. With 7 calls the band is their range: it holds the median with 98.4 % (1 - 2 / 2^7), and the ranges of
# two reruns of an unchanged layer miss each other in one direction 1 time in 3,432 (1 / C(14, 7)); with 5 calls,
# 1 in 252, too often for a model of a hundred layers. Each call costs one eager inference under the tracer.
TRACE_CALLS = 7


@dataclass(frozen=True)
class StudyRequest:
    model: str
    backend: str = "auto"
    device: str | None = None  # cuda | cpu; None picks
    variants: str | None = None  # None: fp32,fp16,fp8 on CUDA; fp32,bf16,fp8 on the CPU
    batch: int = 1
    fp8_recipes: tuple[str, ...] = ()
    fp8_exclude: tuple[str, ...] = ()
    images: str | None = None
    calib_count: int = 16
    eval_count: int | None = None  # None: every image, calibration images included
    rounds: int | None = None
    iters: int | None = None
    warmup_s: float | None = None
    switch_warmup: int | None = None  # replays discarded after each switch of variant in a round
    threads: int | None = None  # torch CPU threads
    tracer: str = "auto"
    trace_calls: int = TRACE_CALLS
    checkpoint: str | None = None
    out: str | None = None
    raw_trace: str | None = None
    opt_level: int = 3
    seed: int = 0
    command: tuple[str, ...] = field(default=(), compare=False)

    def validate(self) -> None:
        for name in ("batch", "calib_count", "trace_calls"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        if self.trace_calls > 1000 or self.batch > 65536:
            raise InputError("--trace-calls is at most 1000 and --batch at most 65536")
        for name in ("rounds", "iters"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"--{name} must be at least 1")
        if self.warmup_s is not None and not (math.isfinite(self.warmup_s) and 0 <= self.warmup_s <= 3600):
            raise InputError("--warmup must be between 0 and 3600 seconds")
        if not 0 <= self.opt_level <= 5:
            raise InputError("--opt-level must be between 0 and 5")
        if self.tracer not in TRACER_CHOICES:
            raise InputError(f"unknown tracer {self.tracer!r}; use {', '.join(TRACER_CHOICES)}")
        if self.backend not in BACKEND_CHOICES:
            raise InputError(f"unknown backend {self.backend!r}; use {', '.join(BACKEND_CHOICES)}")
        if self.device not in (None, "cuda", "cpu"):
            raise InputError(f"unknown device {self.device!r}; use cuda or cpu")
        from builders.fp8_recipes import get_recipe

        named = parse_variants(self.variants, [], []) if self.variants is not None else ()
        for recipe in [*self.fp8_recipes, *(v.recipe for v in named if v.recipe)]:
            get_recipe(recipe)
        if self.eval_count is not None and self.eval_count < 1:
            raise InputError("--eval-count must be at least 1")
        if self.threads is not None and not 1 <= self.threads <= 1024:
            raise InputError("--threads must be between 1 and 1024")
        if self.switch_warmup is not None and not 0 <= self.switch_warmup <= 10000:
            raise InputError("--switch-warmup must be between 0 and 10000")
        if self.raw_trace is not None and os.path.lexists(self.raw_trace) and not os.path.isdir(self.raw_trace):
            raise InputError(f"--raw-trace {self.raw_trace} is a file; give a folder")


def check_name(text: str) -> str:
    """A name given on the command line (`--name`), refused where it could act as a path or break a file name."""
    if not text.strip():
        raise InputError("a name cannot be empty")
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > NAME_LIMIT:
        raise InputError(f"a name is at most {NAME_LIMIT} characters (bytes in UTF-8), not {size}")
    if "/" in text or "\\" in text or ".." in text:
        raise InputError(f"{text!r} is a path, not a name: leave out '/', '\\' and '..'")
    if not text.isprintable():
        raise InputError(f"{text!r}: a name holds no control characters (NUL, newline, ...)")
    return text
