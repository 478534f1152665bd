"""The live study shows figures as they come: a variant's row as soon as it has one, libraries' output in the log
(never on the screen), a log that keeps every line and follows the newest, an estimate that moves."""

from __future__ import annotations

import contextlib
import os
import time

from textual.widgets import Log, Static
from textual.worker import WorkerFailed

from inspector.request import StudyRequest
from inspector.study import Progress
from inspector.tui.app import InspectorApp
from inspector.tui.output import LibraryOutput
from inspector.tui.screens.study import StudyScreen
from tests.conftest import H200


def tiny_request(tmp_path, variants: str = "fp32,bf16") -> StudyRequest:
    return StudyRequest(model="test_resnet", device="cpu", variants=variants, rounds=2, iters=1, warmup_s=0,
                        calib_count=2, out=str(tmp_path / "live.json"), command=("trt-inspect", "test_resnet"))


def endless_study(monkeypatch, tmp_path, lines: int = 0) -> None:
    """A study that saves a session, writes `lines` lines to descriptor 2 as C code would, then runs until stopped."""
    path = tmp_path / "running.json"
    path.write_bytes((H200 / "senet154-h200.json").read_bytes())

    def endless(request, report, force=False):
        report(Progress("setup", "session", session_path=path))
        for i in range(lines):
            os.write(2, f"USDT: line {i} profiler_stop\n".encode())
        report(Progress("build", "building fp32", "fp32", 0, 2))
        while True:
            time.sleep(0.01)

    monkeypatch.setattr("inspector.tui.screens.study.run_requested_study", endless)


async def stopped(app: InspectorApp, pilot) -> None:
    """Stop the endless study (as ctrl+x does) and wait for its thread: a failed assertion never leaves it running."""
    screen = next(s for s in app.screen_stack if isinstance(s, StudyScreen))
    if screen.running:
        screen.stop()
    with contextlib.suppress(WorkerFailed):  # the stopped study's worker ends in StudyStopped, as ctrl+x leaves it
        await app.workers.wait_for_complete()
    await pilot.pause()


async def test_each_row_shows_its_figures_as_soon_as_it_has_them(tmp_path, monkeypatch):
    """Build time while the variant is still measured; the first round's latency before the study ends."""
    seen: list[tuple[str, int, list[dict[str, object]]]] = []
    live_table = StudyScreen.live_table

    def recording(self, p):
        table = live_table(self, p)
        seen.append((p.phase, p.done, [dict(zip(table.labels, row, strict=False)) for row in table.rows]))
        return table

    monkeypatch.setattr(StudyScreen, "live_table", recording)
    app = InspectorApp(study=tiny_request(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert seen and all(list(rows[0])[:3] == ["variant", "status", "build s"] for _, _, rows in seen if rows)
    measuring = [row for phase, _, rows in seen if phase in ("quality", "trace") for row in rows
                 if str(row["status"]).startswith("running")]
    assert measuring and all(row["build s"] is not None for row in measuring)  # built: its build time is shown
    first_round = [rows for phase, done, rows in seen if phase == "timing" and done == 1]
    assert first_round and all(row["median ms"] is not None for row in first_round[0])  # round 1 of 2: latency


async def test_library_output_reaches_the_log_and_never_the_terminal(tmp_path, monkeypatch, capfd):
    """What C code writes to descriptor 2 (the torch profiler's `USDT: ... profiler_stop`) is a log line."""
    endless_study(monkeypatch, tmp_path, lines=3)
    output = LibraryOutput()
    output.start()
    try:
        app = InspectorApp(study=StudyRequest(model="m"), output=output)
        async with app.run_test(size=(80, 24)) as pilot:
            try:
                await pilot.pause(0.5)
                log = app.screen.query_one(Log)
                assert [line for line in log.lines if "profiler_stop" in line] == [
                    f"USDT: line {i} profiler_stop" for i in range(3)]
            finally:
                await stopped(app, pilot)
    finally:
        output.stop()
    assert "profiler_stop" not in capfd.readouterr().err  # where the terminal would have shown it


async def test_a_real_study_writes_nothing_on_the_terminal(tmp_path, capfd):
    """A CPU study (torch, timm, ModelOpt, the torch profiler): whatever its libraries print, at the C level
    (`ERROR: ... gpuGetDeviceCount failed` on a machine without a GPU) or through Python's warnings, is the log's."""
    output = LibraryOutput()
    capfd.readouterr()
    output.start()
    try:
        app = InspectorApp(study=tiny_request(tmp_path, "fp32,fp8-all"), output=output)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            log = app.screen.query_one(Log)  # kept: the screen gives way to the overview at the end
            await app.workers.wait_for_complete()
            lines = list(log.lines)
    finally:
        output.stop()
    assert capfd.readouterr() == ("", "")  # where the terminal would have shown it
    assert any(line.startswith("[timing] round") for line in lines)


async def test_the_log_keeps_every_line_and_follows_the_newest(tmp_path, monkeypatch):
    endless_study(monkeypatch, tmp_path)
    app = InspectorApp(study=StudyRequest(model="m"))
    async with app.run_test(size=(80, 24)) as pilot:
        try:
            await pilot.pause(0.2)
            screen = app.screen
            for i in range(300):
                screen.post_message(StudyScreen.Output(f"line {i}"))
            await pilot.pause(0.3)
            log = screen.query_one(Log)
            assert [line for line in log.lines if line.startswith("line ")] == [f"line {i}" for i in range(300)]
            assert log.max_scroll_y > 0 and log.scroll_offset.y == log.max_scroll_y  # scrolled to the newest
        finally:
            await stopped(app, pilot)


async def test_the_estimate_moves_between_steps(tmp_path, monkeypatch):
    endless_study(monkeypatch, tmp_path)
    app = InspectorApp(study=StudyRequest(model="m"))
    async with app.run_test(size=(80, 24)) as pilot:
        try:
            await pilot.pause(0.3)
            eta = app.screen.query_one("#eta", Static)
            first = eta.render().plain
            assert first.startswith("variant 1 of 2: ")
            await pilot.pause(2.2)  # no step in between: the line counts on by itself
            assert eta.render().plain != first
        finally:
            await stopped(app, pilot)




async def test_the_live_table_says_what_its_quality_figures_mean(tmp_path, monkeypatch):
    """The caveats a step reports (random weights, a degenerate reference) stand beneath the live table until a later
    step reports others."""
    path = tmp_path / "running.json"
    path.write_bytes((H200 / "senet154-h200.json").read_bytes())
    caveat = "random weights (a stand-in): quality compares numerics; --checkpoint FILE gives trained figures"
    reported = []

    def study(request, report, force=False):
        report(Progress("setup", "session", session_path=path))
        reported.append(True)
        report(Progress("quality", "quality of fp32", "fp32", caveats=(caveat,)))
        reported.append(True)
        while True:
            time.sleep(0.01)

    monkeypatch.setattr("inspector.tui.screens.study.run_requested_study", study)
    app = InspectorApp(study=tiny_request(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        try:
            while len(reported) < 2:
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            shown = str(app.screen.query_one("#caveats", Static).render())
        finally:
            await stopped(app, pilot)
    assert caveat in shown.replace("\n", " ")
