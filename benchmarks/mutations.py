"""Break the measurement path (and the diff's noise rule) one way at a time and check that a test fails (a
mutation check).

    python benchmarks/mutations.py            # the table; exit 1 if a mutant survives or a patch no longer applies
    python benchmarks/mutations.py --jobs 1   # one mutant at a time

Each mutant is a text patch of the real code, applied to a copy of the checkout (tracked and untracked,
not ignored files) in a temporary folder; the measurement tests run there. The checkout is never touched.
A patch whose text no longer occurs exactly once is reported as such: update it with the code.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ["tests/profilers/test_mutations.py", "tests/profilers/test_stats.py", "tests/profilers/test_attribution.py",
         "tests/inspector/test_study_fake.py", "tests/profilers/test_reviewer_fields.py",
         "tests/profilers/test_kernel_trace.py", "tests/sessions/test_diff_noise.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    edits: tuple[tuple[str, str, str], ...]  # (file, text, replacement)
    alternatives: tuple[tuple[str, str, str], ...] = ()  # the same break in another version of the code


def mutant(name: str, *edits: tuple[str, str, str], alternatives: tuple[tuple[str, str, str], ...] = ()) -> Mutant:
    return Mutant(name, edits, alternatives)


TIMING, STATS, STUDY = "profilers/timing.py", "profilers/stats.py", "inspector/study.py"
ATTRIBUTION, CUPTI, QUALITY = "profilers/attribution.py", "profilers/kernel_trace.py", "profilers/quality.py"
DIFF = "sessions/analyses/diff.py"

QUALITY_V2 = ((QUALITY, "top1_agreement=float(totals[1] / totals[0]),", "top1_agreement=1.0,"),
              (QUALITY, "mean_kl=max(0.0, float(totals[2] / totals[0])),", "mean_kl=0.0,"),
              (QUALITY, "max_abs_logit_error=max_error,", "max_abs_logit_error=0.0,"),
              (QUALITY, "nonfinite=int(totals[3]),", "nonfinite=0,"))  # compare() summing over batches

MUTANTS = [
    mutant("timing returns a constant",
           (TIMING, "samples.append((time.perf_counter() - t0) * 1e3 / per_sample)", "samples.append(1.0)")),
    mutant("no warm-up", (TIMING, "        _warm(steps[name], plan.warmup_s, clock)\n", "")),
    mutant("warm-up of one call, not of --warmup seconds",
           (TIMING, "deadline = time.perf_counter() + seconds", "deadline = time.perf_counter()")),
    mutant("no interleaving (all rounds of one variant, then the next)",
           (TIMING, ("    for round_index in range(plan.rounds):\n"
                     "        for turn, name in enumerate(round_order(names, round_index)):\n"),
            "    for turn, name in enumerate(names):\n        for round_index in range(plan.rounds):\n"),
           (TIMING, "        if on_round is not None:\n",  # the reports and the collection, once a round
            "    for round_index in range(plan.rounds):\n        if on_round is not None:\n")),
    mutant("rounds in one order (A B C, A B C), not alternating",
           (TIMING, "return list(names) if round_index % 2 == 0 else list(reversed(names))", "return list(names)")),
    mutant("a later round's opening discards the samples' worth only, not the floor",
           (TIMING, "first_turn[name] if round_index == turn == 0 else discards[name])",
            ("first_turn[name] if round_index == turn == 0 else\n"
             "                     plan.switch_warmup * per_sample[name] if turn == 0 else discards[name])"))),
    mutant("the study's first turn discards the floor of every turn, not its own longer one",
           (TIMING, "single_ms, FIRST_TURN_MIN_MS)", "single_ms)")),
    mutant("no floor under the discard on a GPU",
           (TIMING, "    return max(counted, min(MAX_DISCARD_INFERENCES, math.ceil(floor_ms / single_ms)))",
            "    return counted")),
    mutant("cuda_graph flag lies (claimed on CUDA whatever the steps)",
           (STUDY, "cuda_graph = device.gpu and graphed", "cuda_graph = device.gpu")),
    mutant("cuda_graph flag lies (one graphed step is enough)",
           (STUDY, "all(step.graphed for step in steps.values())", "any(step.graphed for step in steps.values())")),
    mutant("cuda_graph flag lies (claimed on the CPU)",
           (STUDY, "cuda_graph = device.gpu and graphed", "cuda_graph = graphed")),
    mutant("timed region always says CUDA graph",
           (TIMING, 'what = "CUDA-graph replays" if cuda_graph else "eager forward passes"',
            'what = "CUDA-graph replays"')),
    mutant("CUPTI dropped-record count forced to 0", (CUPTI, "return int(dropped.value)", "return 0")),
    mutant("CUPTI left attached after a trace (every later row timed with it)",
           (CUPTI, "        self.detach_note = self._detach()\n", '        self.detach_note = ""\n')),
    mutant("dropped count lost on the way to the session",
           (ATTRIBUTION, "dropped=records.dropped + incomplete,", "dropped=incomplete,")),
    mutant("unattributed hard-coded to 0",
           (ATTRIBUTION, "unattributed=sum(1 for owner in attribution.owners if owner is None),", "unattributed=0,")),
    mutant("quality always perfect",
           (QUALITY, "top1_agreement=agreement,", "top1_agreement=1.0,"), (QUALITY, "mean_kl=kl,", "mean_kl=0.0,"),
           (QUALITY, "max_abs_logit_error=float(np.abs(ref - cand_clean).max()),", "max_abs_logit_error=0.0,"),
           (QUALITY, "nonfinite=nonfinite,", "nonfinite=0,"), alternatives=QUALITY_V2),
    mutant("top-1 agreement always 1", (QUALITY, "top1_agreement=agreement,", "top1_agreement=1.0,"),
           alternatives=QUALITY_V2[:1]),
    mutant("mean KL always 0", (QUALITY, "mean_kl=kl,", "mean_kl=0.0,"), alternatives=QUALITY_V2[1:2]),
    mutant("max logit error always 0",
           (QUALITY, "max_abs_logit_error=float(np.abs(ref - cand_clean).max()),", "max_abs_logit_error=0.0,"),
           alternatives=QUALITY_V2[2:3]),
    mutant("non-finite outputs never counted", (QUALITY, "nonfinite=nonfinite,", "nonfinite=0,"),
           alternatives=QUALITY_V2[3:]),
    mutant("GPU sampled once, not during timing",
           ("profilers/environment.py",
            "        while not self._stop.wait(self._interval):\n            self._sample()\n",
            "        self._stop.wait()\n")),
    mutant("tool commit never recorded",
           ("sessions/documents/document.py", 'return f"{head}-dirty" if changes else head or None', "return None")),
    mutant("median replaced by mean",
           (STATS, "median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2", "median = mean"),
           alternatives=((STATS, "median_ms=median(ordered),", "median_ms=mean,"),)),
    mutant("diff judges latencies on one process's bands (no widening for the other process)",
           (DIFF, "band_a, band_b = across_processes(own_a), across_processes(own_b)",
            "band_a, band_b = own_a, own_b")),
    mutant("diff lets the load explain a latency on the widened bands",
           (DIFF, "machine = (machine_latency(own_a, own_b,", "machine = (machine_latency(band_a, band_b,")),
]


def checkout_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def copy_checkout(target: Path) -> None:
    for name in checkout_files():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)


def apply(m: Mutant, tree: Path) -> str | None:
    """Patch `tree` with the mutant's edits, or else its alternatives; returns why neither applies, or None."""
    problem = _applies(m.edits, tree)
    if problem and m.alternatives and not _applies(m.alternatives, tree):
        return _patch(m.alternatives, tree)
    return problem or _patch(m.edits, tree)


def _applies(edits, tree: Path) -> str | None:
    for file, text, _ in edits:
        count = (tree / file).read_text().count(text)
        if count != 1:
            return f"{file}: the patched text occurs {count} times"
    return None


def _patch(edits, tree: Path) -> None:
    for file, text, replacement in edits:
        path = tree / file
        path.write_text(path.read_text().replace(text, replacement))


def run_tests(tree: Path) -> tuple[int, list[str], str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *TESTS],
                            cwd=tree, capture_output=True, text=True, timeout=900, check=False)
    failed = sorted(set(re.findall(r"^FAILED (\S+?)(?: - |$)", result.stdout, re.MULTILINE)))
    return result.returncode, failed, result.stdout[-2000:]


def check(m: Mutant | None) -> tuple[str, str, list[str]]:
    """(mutant name, verdict, failing tests) in a fresh copy of the checkout."""
    name = m.name if m else "(no mutation)"
    with tempfile.TemporaryDirectory(prefix="trt-inspect-mutant-") as folder:
        tree = Path(folder)
        copy_checkout(tree)
        if m is not None:
            problem = apply(m, tree)
            if problem:
                return name, f"PATCH DOES NOT APPLY ({problem})", []
        code, failed, tail = run_tests(tree)
    if m is None:
        return name, "passes" if code == 0 else f"FAILS UNMUTATED:\n{tail}", failed
    if code == 0:
        return name, "SURVIVED", []
    return name, ("killed" if failed else f"ERROR (exit {code}, no test failed):\n{tail}"), failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="only mutants whose name contains this")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if args.only is None or args.only in m.name]
    baseline = check(None)
    if baseline[1] != "passes":
        print(baseline[1])
        return 1
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(check, mutants))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout
    print(f"mutation check at {commit.strip()}: tests {' '.join(TESTS)}; unmutated: passes")
    print()
    print("| mutant | file | result | killed by |")
    print("|---|---|---|---|")
    for m, (name, verdict, failed) in zip(mutants, results, strict=False):
        files = ", ".join(sorted({f for f, _, _ in m.edits}))
        tests = "<br>".join(t.replace("tests/", "").replace(".py::", "::") for t in failed)
        print(f"| {name} | {files} | {verdict} | {tests} |")
    killed = sum(1 for _, verdict, _ in results if verdict == "killed")
    print()
    print(f"{killed} of {len(mutants)} mutants killed")
    return 0 if killed == len(mutants) else 1


if __name__ == "__main__":
    sys.exit(main())
