"""The TUI driven as a user drives it: Pilot key presses, then what the screens hold."""

import contextlib
import subprocess
import sys

import pytest

from inspector.tui.app import InspectorApp
from inspector.tui.screens.browser import BrowserScreen
from inspector.tui.screens.modals import FilterScreen, HelpScreen
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.tables import (
    AllKernelsScreen,
    DiffScreen,
    FlagsScreen,
    GroupsScreen,
    KernelsScreen,
    LayersScreen,
    PrecisionScreen,
)
from sessions.documents import storage
from tests.conftest import H200, ROOT

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
        # fp8-all beside fp16, largest added time first: quantize / dequantize, then the convolutions
        assert app.screen.panel.table.cursor_key == "quantize / dequantize"
        await pilot.press("slash", *"^grouped", "enter", "enter")
        layers = app.screen
        assert isinstance(layers, LayersScreen) and layers.panel.table.row_count == 50
        assert layers.crumbs[-1] == "grouped convolution in fp8-all"
        await pilot.press("enter")
        kernels = app.screen
        assert isinstance(kernels, KernelsScreen) and kernels.crumbs[-1] == "layer1.0.conv2 in fp8-all"
        (row,) = kernels.panel.table._rows
        assert row[1] == 64  # 64 launches per call of one kernel: the per-group split
        await pilot.press("right_square_bracket")  # same layer in the next variant
        assert kernels.variant_name == "fp8-no-se" and kernels.crumbs[-1] == "layer1.0.conv2 in fp8-no-se"
        await pilot.press("escape", "escape", "escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_filter_sort_and_flags(session):
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "slash", *"^grouped", "enter", "enter")
        layers = app.screen
        await pilot.press("slash")
        assert isinstance(app.screen, FilterScreen)
        await pilot.press(*"layer1\\.", "enter")
        assert layers.panel.table.row_count == 3
        await pilot.press("s")  # sort by the first column, then ...
        await pilot.press("s", "s", "s")  # ... k/call, largest first
        table = layers.panel.table
        assert (table.sort_column, table.sort_reverse) == (3, True) and "k/call ▼" in table.header_text()
        await pilot.press("slash", "escape")  # a cancelled filter dialog keeps the filter
        assert layers.panel.pattern == "layer1\\." and table.row_count == 3
        await pilot.press("escape", "escape")
        await pilot.press("f")
        flags = app.screen
        assert isinstance(flags, FlagsScreen) and flags.panel.table.row_count == 9
        await pilot.press("enter")
        assert isinstance(app.screen, KernelsScreen)


async def test_help_and_environment_and_export(session, tmp_path, isolated_home):
    copy = tmp_path / "s.json"
    copy.write_bytes(SESSION.read_bytes())
    app = InspectorApp(session=session, path=copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen) and "c: Compare" in app.screen.text
        await pilot.press("escape", "x")
        exports = isolated_home / "exports"
        first = exports / "senet154-session-2026-11-30T04-05-08.md"
        assert first.read_text().startswith("# senet154") and not (tmp_path / "s.md").exists()
        await pilot.press("x")  # a second export never overwrites the first
        assert first.with_name(first.stem + "-2.md").is_file()
        await pilot.press("e")
        assert "Timed region" in app.screen.markdown


async def test_browser_compares_two_marked_sessions(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("senet154-h200.json", "senet154-h200-b8.json"):
        (folder / name).write_bytes((H200 / name).read_bytes())
    app = InspectorApp(sessions_folder=folder)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()  # the list is read in a worker: the screen opens at once
        await pilot.pause()
        assert isinstance(app.screen, BrowserScreen) and app.screen.panel.table.row_count == 2
        await pilot.press("space", "j", "space", "c")
        assert isinstance(app.screen, DiffScreen)
        # batch 1 against batch 8: compared per image, where batch 8 is faster
        assert (app.screen.diff.per_image and not app.screen.diff.regressions
                and "no regression" in app.screen.crumbs[-1])
        notes = app.screen.panel.data.notes  # A and B named
        assert notes[:2] == ("A: senet154-h200.json", "B: senet154-h200-b8.json")
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


async def test_table_exports_as_shown(session, tmp_path, monkeypatch, isolated_home):
    from sessions.reports.tables import markdown_table_problems

    monkeypatch.chdir(tmp_path)
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "slash", *"^grouped", "enter", "enter", "slash", *"layer1", "enter", "x")
    assert not list(tmp_path.glob("*.md"))  # one documented place, never the working folder
    (written,) = (isolated_home / "exports").glob("*.md")
    assert written.name == "senet154-grouped-convolution-in-fp8-all.md"
    text = written.read_text()
    assert markdown_table_problems(text) == [] and text.count("| layer1.") == 3


async def test_live_study_shows_progress_and_lands_on_the_overview(tmp_path, monkeypatch):
    from inspector.request import StudyRequest
    from inspector.tui.widgets.table_panel import TablePanel

    landed: list[list[str]] = []
    show = TablePanel.show

    def recording_show(self, data):
        show(self, data)
        if self.id == "landed":  # what the widget holds, not only what it was given
            landed.append([row[0] for row in self.table.rows])

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
    code = ("import sys, inspector.cli, inspector.study, sessions.documents.storage, sessions.reports.export, "
            "profilers.trt_import.importer; print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_snapshot_overview(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), terminal_size=(120, 36))


def test_snapshot_groups(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g"], terminal_size=(120, 36))


def test_snapshot_layers(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g", "enter"],
                        terminal_size=(120, 36))


def test_snapshot_kernels(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g", "enter", "enter"],
                        terminal_size=(120, 36))


def test_snapshot_diff(snap_compare, tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("senet154-h200.json", "senet154-h200-b8.json"):
        (folder / name).write_bytes((H200 / name).read_bytes())
    app = InspectorApp(sessions_folder=folder)

    async def read(pilot):
        await app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app, press=["space", "j", "space", "c"], terminal_size=(120, 36), run_before=read)


# -- bugs found by the TUI review ----------------------------------------------------------------
async def test_flagged_layer_then_next_variant_shows_that_variants_layer(session, isolated_home):
    """After `]` the title and the rows (and `x`) name the same variant and layer."""
    from sessions.reports.views import kernel_table

    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("f", "enter")
        kernels = app.screen
        assert kernels.crumbs[-1] == "layer1.0.conv2 in fp16"
        await pilot.press("right_square_bracket", "x")
        assert kernels.crumbs[-1] == "layer1.0.conv2 in fp8-all"
        assert kernels.panel.table.rows == kernel_table(session, session.variant("fp8-all"), "layer1.0.conv2").rows
    (written,) = (isolated_home / "exports").glob("*.md")
    assert written.name == "senet154-layer1.0.conv2-in-fp8-all.md"
    assert written.read_text().startswith("senet154 > flagged layers > layer1.0.conv2 in fp8-all")


async def test_header_scrolls_with_the_body_and_the_first_column_stays(session):
    """The header is the table's first line; sideways scrolling moves it with the rows."""
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("g")
        table = app.screen.panel.table
        await pilot.press(*["right"] * 30)
        await pilot.pause()
        assert table.scroll_offset.x > 0
        header, first = table.render_line(0).text, table.render_line(1).text
        assert header.startswith("role") and first.startswith("quantize / dequantize")
        column = table.column_at(header.index("fp16", 5) if "fp16" in header[5:] else 40)
        assert column is not None and table.columns[column].label.split()[0] in header


async def test_regrouping_renames_the_first_column(session):
    """The columns follow the data."""
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "2")
        table = app.screen.panel.table
        assert table.columns[0].label == "stage" and "layer3" in [r[0] for r in table.rows]
        await pilot.press("3")
        assert table.columns[0].label == "kernel"


def _endless_study(monkeypatch, tmp_path):
    """A study that saves a session and then runs until it is interrupted (no torch)."""
    import time

    from inspector.study import Progress

    path = tmp_path / "running.json"
    path.write_bytes(SESSION.read_bytes())

    def endless(request, report, force=False):
        report(Progress("setup", "session", session_path=path))
        while True:
            time.sleep(0.01)

    monkeypatch.setattr("inspector.tui.screens.study.run_requested_study", endless)
    return path


async def test_ctrl_c_during_a_study_asks_then_exits_130_keeping_the_session(tmp_path, monkeypatch):
    """Like the headless Ctrl-C; and ctrl+q asks too."""
    from inspector.request import StudyRequest
    from inspector.tui.screens.modals import ConfirmScreen

    path = _endless_study(monkeypatch, tmp_path)
    app = InspectorApp(study=StudyRequest(model="m"))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("ctrl+q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
    assert app.return_code == 130 and str(path) in app.exit_note and path.is_file()


async def test_a_cancelled_study_is_not_an_error(tmp_path, monkeypatch):
    """Ctrl+x stops the study; no red Error dialog; the saved part opens."""
    from inspector.request import StudyRequest
    from inspector.tui.screens.modals import ErrorScreen

    _endless_study(monkeypatch, tmp_path)
    app = InspectorApp(study=StudyRequest(model="m"))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("ctrl+x")
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ErrorScreen) and isinstance(app.screen, OverviewScreen)


async def test_export_to_an_unwritable_place_is_one_notice(session, isolated_home):
    """No traceback, the app goes on."""
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "exports").write_text("a file where the exports folder would be")
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("x")
        await pilot.press("g", "x")
        await pilot.pause()
        assert isinstance(app.screen, GroupsScreen) and app.is_running
        assert [n.severity for n in app._notifications] == ["error", "error"]


async def test_help_fits_80x24_and_the_browser_never_stacks(tmp_path):
    """Help scrolls and lists this screen's keys; `b` twice is one browser; esc leaves it."""
    from textual.containers import VerticalScroll

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.json").write_bytes(SESSION.read_bytes())
    app = InspectorApp(session=storage.load(SESSION), path=SESSION, sessions_folder=folder)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("b", "b")
        assert sum(isinstance(s, BrowserScreen) for s in app.screen_stack) == 1
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.panel.table.row_count == 1
        await pilot.press("question_mark")
        assert app.screen.query_one(VerticalScroll) and "Mark" in app.screen.text
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_enter_on_a_names_only_import_opens_its_groups(session):
    """A session without kernel tables still has a way in from the overview."""
    import copy

    names_only = copy.deepcopy(session)
    for variant in names_only.variants:
        variant.kernels, variant.trace = None, None
    app = InspectorApp(session=names_only, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("enter")
        assert isinstance(app.screen, GroupsScreen)
        await pilot.press("enter")
        assert isinstance(app.screen, LayersScreen)


async def test_comparison_view_and_both_kernel_lists(session):
    from inspector.tui.screens.tables import CompareScreen, SideBySideScreen

    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CompareScreen) and (screen.a, screen.b) == ("fp16", "fp8-all")
        first = screen.panel.table.rows[0]
        assert first[1] == "quantize / dequantize" and first[4] > 0 and screen.panel.table._tones[0] == "bad"
        await pilot.press("slash", *"conv2$", "enter")
        assert "Σ delta ms" in screen.panel.count_text()
        await pilot.press("enter")
        sides = app.screen
        assert isinstance(sides, SideBySideScreen) and sides.left.rows and sides.right.rows


def test_snapshot_overview_80x24(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), terminal_size=(80, 24))


def test_snapshot_groups_80x24(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["g"], terminal_size=(80, 24))


def test_snapshot_comparison(snap_compare):
    assert snap_compare(InspectorApp(session=storage.load(SESSION), path=SESSION), press=["c"], terminal_size=(120, 36))


async def test_a_click_on_a_header_sorts_by_that_column(session):
    from inspector.tui.widgets.virtual_table import VirtualTable

    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "enter")
        table = app.screen.panel.table
        x = table.header_text().index("k/call")
        await pilot.click(VirtualTable, offset=(x, 0))
        assert table.sort_column == 3 and table.sort_reverse  # numbers: largest first
        counts = [row[3] for row in table.rows]
        assert counts == sorted(counts, reverse=True)


# -- the FP8 answer, sessions without a finished variant, imported engines ------------------------
async def test_the_overview_answers_fp8_above_the_table():
    from inspector.tui.widgets.answer_panel import AnswerPanel
    from inspector.tui.widgets.table_panel import TablePanel

    path = H200 / "senet154-mainjob-warm.json"
    app = InspectorApp(session=storage.load(path), path=path)
    async with app.run_test(size=(120, 36)):
        panel = app.screen.query_one(AnswerPanel)
        text = panel.text.plain
        assert text.startswith("fp8-all (simulated) is 3.81x slower than fp16; quantize / dequantize adds 11.87")
        assert "fp8-no-se (simulated) is 2.80x slower" in text and "fp32 is" not in text
        assert "143 quantizer scales raised" in text and "NaN/Inf on 1 of 15 stress inputs" in text
        assert panel.region.bottom <= app.screen.query_one(TablePanel).region.y  # above the table, on screen


async def test_session_text_in_the_answer_is_neither_markup_nor_control_characters(session):
    import copy

    from inspector.tui.widgets.answer_panel import AnswerPanel

    odd = copy.deepcopy(session)
    odd.variant("fp8-all").name = "[bold red]x[/]\x1b[2J\nfp8"
    odd.study.model = "[b]m[/b]"
    app = InspectorApp(session=odd, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        text = app.screen.query_one(AnswerPanel).text.plain
        assert "[bold red]x[/]" in text and "\x1b" not in text and "x[/]\\x1b[2J\\x0afp8" in text  # escaped, visible
        assert app.screen.query_one("#breadcrumb").render().plain.startswith("[b]m[/b]  batch 1")
        await pilot.press("t")  # a screen's breadcrumb and notes too
        assert ("[b]m[/b] > timeline of [bold red]x[/]\\x1b[2J\\x0afp8"
                in app.screen.query_one("#breadcrumb").render().plain)


@pytest.mark.parametrize("key", ["g", "k", "enter"])
@pytest.mark.parametrize("left", ["none", "failed"])
async def test_no_finished_variant_then_a_drill_key_is_a_notice_not_a_crash(session, key, left):
    import copy

    stopped = copy.deepcopy(session)  # what ctrl+x during the first variant leaves: nothing finished
    if left == "none":
        stopped.variants = []
    else:
        for variant in stopped.variants:
            variant.status, variant.error = "failed", "out of memory"
    app = InspectorApp(session=stopped, path=SESSION)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and app._exception is None


async def test_the_live_view_calls_finished_only_what_the_session_file_holds(tmp_path, monkeypatch):
    from inspector.request import StudyRequest
    from inspector.tui.widgets.table_panel import TablePanel

    out = tmp_path / "live.json"
    seen: list[tuple[list[tuple[str, str]], list[str]]] = []
    show = TablePanel.show

    def recording_show(self, data):
        show(self, data)
        if self.id == "landed":  # each row's status beside what the file on disk holds at that moment
            on_disk = [v.name for v in storage.load(out).variants] if out.exists() else []
            seen.append(([(row[0], row[1]) for row in self.table.rows], on_disk))

    monkeypatch.setattr(TablePanel, "show", recording_show)
    request = StudyRequest(model="test_resnet", device="cpu", variants="fp32,bf16", rounds=2, iters=1, warmup_s=0,
                           calib_count=2, out=str(out), command=("trt-inspect", "test_resnet"))
    app = InspectorApp(study=request)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
    running = [rows for rows, _ in seen if any(status.startswith("running") for _, status in rows)]
    assert [("fp32", "ok"), ("bf16", "running: build: building bf16")] in running  # fp32 saved, bf16 under way
    for rows, on_disk in seen:
        assert [name for name, status in rows if not status.startswith("running")] == on_disk


async def test_the_browser_marks_states_and_refuses_to_diff_a_running_study(tmp_path):
    import copy

    folder = tmp_path / "sessions"
    folder.mkdir()
    done = storage.load(H200 / "senet154-mainjob-warm.json")
    storage.save(done, folder / "done.json")
    running = copy.deepcopy(done)
    running.variants = running.variants[:1]
    running.study.created = "2099-01-01T00:00:00+00:00"  # newest: the first row
    storage.save(running, folder / "running.json")
    app = InspectorApp(sessions_folder=folder)
    with storage.session_lock(folder / "running.json"):
        async with app.run_test(size=(140, 36)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            rows = {row[-1]: row[3] for row in app.screen.panel.table.rows}
            assert rows == {"running.json": "running (building fp16: 1 of 4 variants built)", "done.json": "complete"}
            await pilot.press("space", "j", "space", "c")
            await pilot.pause()
            assert isinstance(app.screen, BrowserScreen)  # no diff opened
            assert any("still being written by a running study" in n.message for n in app._notifications)


async def test_palette_entries_come_from_the_screens_bindings():
    from inspector.tui.screens.timeline import TimelineScreen

    path = H200 / "senet154-mainjob-warm.json"
    app = InspectorApp(session=storage.load(path), path=path)
    async with app.run_test(size=(120, 36)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "overview: Timeline" in titles and "overview: Groups" in titles
        await pilot.press("ctrl+p", *"overview: Timeline", "enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        await pilot.press("ctrl+p", *"timeline: Zoom in", "enter")
        await pilot.pause()
        assert screen.zoom == 2
        await pilot.press("question_mark")
        assert "Zoom in" in app.screen.text and "Timeline" not in app.screen.text  # this screen's keys


async def test_a_layer_of_an_imported_engine_opens_its_page_not_an_empty_kernel_table(tmp_path):
    from inspector.tui.screens.tables import LayerPageScreen, LayersScreen
    from tests.conftest import fixture_dir, run_cli

    qat = fixture_dir("trt8-resnet-a100-int8-qat")
    path = tmp_path / "qat.json"
    done = run_cli("import", "--layers", str(qat / "resnet-qat.onnx.engine.graph.json"), "--profile",
                   str(qat / "resnet-qat.onnx.engine.profile.json"), "--out", str(path))
    assert done.returncode == 0, done.stderr
    app = InspectorApp(session=storage.load(path), path=path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("g", "slash", *"^other conv", "enter", "enter")
        layers = app.screen
        assert isinstance(layers, LayersScreen)
        detail = layers.panel.query_one(".table-detail").render().plain
        assert "tactic: ampere_fp32_icudnn_int8x4_128x64_relu_medium_nn_v1" in detail and "Int8 format" in detail
        await pilot.press("enter")
        page = app.screen
        assert isinstance(page, LayerPageScreen)
        facts = dict(page.panel.table.rows)
        assert (facts["precision"] == "int8 (the engine chose int8, which the build allowed; real kernels)"
                and facts["reformats"].startswith("1 costing 0.061 ms"))


async def test_fp8_choices_by_role_and_into_a_variants_groups():
    """`p` on the overview: what each engine variant's FP8 layers ran, by role (the rows `precision_table` gives);
    Enter opens that variant's groups; a session whose variants record none says so and stays."""
    from sessions.reports import views

    engine = ROOT / "benchmarks/results/h200/scaled-fp16/main/senet154-warm.json"
    loaded = storage.load(engine)
    app = InspectorApp(session=loaded, path=engine)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("p")
        screen = app.screen
        assert isinstance(screen, PrecisionScreen)
        expected = views.precision_table(loaded, screen.rules)
        assert screen.panel.table.row_count == len(expected.rows) == 7  # all: 4 roles; no-se: 3 (SE not quantized)
        await pilot.press("down", "down", "down", "down", "enter")  # the fifth row: cudnn-fp8-no-se's first role
        assert isinstance(app.screen, GroupsScreen) and app.screen.drill_variant == "cudnn-fp8-no-se"
    plain_app = InspectorApp(session=storage.load(SESSION), path=SESSION)
    async with plain_app.run_test(size=(120, 36)) as pilot:
        await pilot.press("p")
        assert isinstance(plain_app.screen, OverviewScreen)
