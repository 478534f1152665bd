"""The TUI driven as a user drives it: Pilot key presses, then what the screens hold."""

import contextlib
import subprocess
import sys

import pytest

from inspector.tui.app import InspectorApp
from inspector.tui.screens.browser import BrowserScreen
from inspector.tui.screens.modals import FilterScreen, HelpScreen
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.tables import AllKernelsScreen, DiffScreen, FlagsScreen, GroupsScreen, KernelsScreen, LayersScreen
from sessions import storage
from tests.conftest import H200

SESSION = H200 / "senet154-h200.json"


@pytest.fixture(scope="module")
def session():
    return storage.load(SESSION)


async def test_drill_group_layer_kernel_and_back(session):
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("g")
        assert isinstance(app.screen, GroupsScreen)
        # groups come in the order of the first variant's time: fp16 spends most in grouped convolutions
        assert app.screen.panel.table.cursor_key == "grouped convolution"
        await pilot.press("enter")
        layers = app.screen
        assert isinstance(layers, LayersScreen) and layers.panel.table.row_count == 50
        assert layers.crumbs[-1] == "grouped convolution in fp8-all"
        await pilot.press("enter")
        kernels = app.screen
        assert isinstance(kernels, KernelsScreen) and kernels.crumbs[-1] == "layer1.0.conv2"
        (row,) = kernels.panel.table._rows
        assert row[1] == 64  # 64 launches per call of one kernel: the per-group split
        await pilot.press("right_square_bracket")  # same layer in the next variant
        assert kernels.variant_name == "fp8-no-se"
        await pilot.press("escape", "escape", "escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_filter_sort_and_flags(session):
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "enter")
        layers = app.screen
        await pilot.press("slash")
        assert isinstance(app.screen, FilterScreen)
        await pilot.press(*"layer1\\.", "enter")
        assert layers.panel.table.row_count == 3
        await pilot.press("s")  # sort by the first column, then ...
        await pilot.press("s", "s", "s")  # ... k/call, largest first
        table = layers.panel.table
        assert (table.sort_column, table.sort_reverse) == (3, True) and "k/call ▼" in table.header_text()
        await pilot.press("escape", "escape")
        await pilot.press("f")
        flags = app.screen
        assert isinstance(flags, FlagsScreen) and flags.panel.table.row_count == 9
        await pilot.press("enter")
        assert isinstance(app.screen, KernelsScreen)


async def test_help_and_environment_and_export(session, tmp_path):
    copy = tmp_path / "s.json"
    copy.write_bytes(SESSION.read_bytes())
    app = InspectorApp(session=session, path=copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "x")
        assert (tmp_path / "s.md").read_text().startswith("# senet154")
        await pilot.press("e")
        assert "Timed region" in app.screen.markdown


async def test_browser_compares_two_marked_sessions(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("senet154-h200.json", "senet154-h200-b8.json"):
        (folder / name).write_bytes((H200 / name).read_bytes())
    app = InspectorApp(sessions_folder=folder)
    async with app.run_test(size=(120, 36)) as pilot:
        assert isinstance(app.screen, BrowserScreen) and app.screen.panel.table.row_count == 2
        await pilot.press("space", "j", "space", "c")
        assert isinstance(app.screen, DiffScreen)
        assert app.screen.diff.regressions and "regression(s)" in app.screen.crumbs[-1]
        await pilot.press("escape", "enter")
        assert isinstance(app.screen, OverviewScreen)


async def test_ten_thousand_kernel_rows_open_at_once(session):
    big = session.variant("fp8-all")
    assert len(big.kernels) > 6000
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("k")
        screen = app.screen
        assert isinstance(screen, AllKernelsScreen) and screen.panel.table.row_count == len(big.kernels)
        await pilot.press("G")
        assert screen.panel.table.cursor == len(big.kernels) - 1


async def test_table_exports_as_shown(session, tmp_path, monkeypatch):
    from sessions.tables import markdown_table_problems

    monkeypatch.chdir(tmp_path)
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "enter", "slash", *"layer1", "enter", "x")
    (written,) = tmp_path.glob("trt-inspect-*.md")
    text = written.read_text()
    assert markdown_table_problems(text) == [] and text.count("| layer1.") == 3


async def test_live_study_shows_progress_and_lands_on_the_overview(tmp_path, monkeypatch):
    from inspector.request import StudyRequest
    from inspector.tui.widgets.table_panel import TablePanel

    landed: list[list[str]] = []
    show = TablePanel.show

    def recording_show(self, data):
        if self.id == "landed":
            landed.append([label for label, _ in data.columns[1:]])
        show(self, data)

    monkeypatch.setattr(TablePanel, "show", recording_show)

    request = StudyRequest(model="test_resnet", device="cpu", variants="fp32,bf16", rounds=1, iters=1, warmup_s=0,
                           calib_count=2, out=str(tmp_path / "live.json"), command=("trt-inspect", "test_resnet"))
    app = InspectorApp(study=request)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        assert [v.name for v in app.screen.session.variants] == ["fp32", "bf16"]
    assert ["fp32"] in landed and ["fp32", "bf16"] in landed  # variants appeared as they landed


async def test_live_study_error_opens_a_dialog(tmp_path):
    from textual.worker import WorkerFailed

    from inspector.request import StudyRequest
    from inspector.tui.screens.modals import ErrorScreen

    app = InspectorApp(study=StudyRequest(model="resnet19", device="cpu", out=str(tmp_path / "x.json")))
    async with app.run_test(size=(120, 36)) as pilot:
        with contextlib.suppress(WorkerFailed):  # the worker's failure is what the screen reports
            await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen) and "unknown model 'resnet19'" in app.screen.message


def test_headless_cli_imports_no_textual():
    code = "import sys, inspector.cli, inspector.study, sessions.storage, sessions.export, profilers.trt_files; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_snapshot_overview(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), terminal_size=(120, 36))


def test_snapshot_groups(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g"], terminal_size=(120, 36))


def test_snapshot_layers(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g", "enter"], terminal_size=(120, 36))


def test_snapshot_kernels(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g", "enter", "enter"], terminal_size=(120, 36))


def test_snapshot_diff(snap_compare, tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("senet154-h200.json", "senet154-h200-b8.json"):
        (folder / name).write_bytes((H200 / name).read_bytes())
    app = InspectorApp(sessions_folder=folder)
    assert snap_compare(app, press=["space", "j", "space", "c"], terminal_size=(120, 36))
