"""Every screen at 80x24: the table keeps five rows, each key the footer offers does something on every row kind with
one press, `d` toggles a pane that is never empty, the help is laid out in columns."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from textual.widgets import Footer

from inspector.tui.app import InspectorApp
from inspector.tui.screens.modals import HelpScreen
from inspector.tui.widgets.table_panel import TablePanel
from sessions.documents import storage
from tests.conftest import H200

SESSION = H200 / "senet154-mainjob-warm.json"  # four variants, fp8 simulated, kernels traced
SIZE = (80, 24)

# (name, keys from the overview): one screen of each kind, every kind of row under the cursor
SCREENS = [
    ("overview", []),
    ("groups by role", ["g"]),
    ("groups by stage", ["g", "2"]),
    ("groups by kernel class", ["g", "3"]),
    ("layers", ["g", "enter"]),
    ("kernels of a layer", ["g", "enter", "enter"]),
    ("all kernels", ["k"]),
    ("flagged layers", ["f"]),
    ("comparison", ["c"]),
    ("both kernel lists", ["c", "enter"]),
    ("timeline", ["t"]),
]


@pytest.fixture(scope="module")
def session():
    return storage.load(SESSION)


@pytest.fixture(scope="module")
def names_only(session):
    """An imported engine's session: layers without kernels, so a layer opens its page."""
    names = copy.deepcopy(session)
    for variant in names.variants:
        variant.kernels, variant.trace = None, None
    return names


def state(app: InspectorApp) -> tuple[Any, ...]:
    """What a key press can change: the screen, the stack, notices, focus, every table's rows, order and panes."""
    screen = app.screen
    panels = tuple((p.table.cursor, p.table.sort_column, p.table.sort_reverse, p.pattern, p.data.title,
                    tuple(p.data.keys[:5]), p.has_class("with-detail")) for p in screen.query(TablePanel))
    return (id(screen), len(app.screen_stack), len(app._notifications), id(app.focused), panels,
            tuple(getattr(screen, "crumbs", ())), getattr(screen, "zoom", None))


def offered(app: InspectorApp) -> list[str]:
    """The first key of each binding the footer shows on the current screen."""
    return [active.binding.key.split(",")[0] for active in app.screen.active_bindings.values()
            if active.binding.show and active.binding.description]


def assert_rows_kept(app: InspectorApp, where: str) -> None:
    for panel in app.screen.query(TablePanel):
        visible = panel.table.scrollable_content_region.height - 1  # the header is the table's first line
        assert visible >= min(TablePanel.MIN_ROWS, panel.table.row_count), (where, visible, panel.table.row_count)


async def open_screen(app: InspectorApp, pilot: Any, keys: list[str]) -> None:
    """From the overview (whatever is above it is closed first), press `keys`."""
    while len(app.screen_stack) > 2:
        app.pop_screen()
        await pilot.pause()
    await pilot.press(*keys)
    await pilot.pause()


@pytest.mark.parametrize(("name", "keys"), SCREENS, ids=[name for name, _ in SCREENS])
async def test_at_80x24_the_table_keeps_five_rows_and_every_footer_key_does_something(session, name, keys):
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot, keys)
        target = app.screen
        assert_rows_kept(app, name)
        footer = target.query_one(Footer)
        assert sum(key.outer_size.width for key in footer.children) <= SIZE[0], f"{name}: the footer is cut off"
        keys_offered = offered(app)
        assert "enter" in keys_offered and "question_mark" in keys_offered
        for key in keys_offered:
            before = state(app)
            await pilot.press(key)
            await pilot.pause()
            assert state(app) != before, f"{name}: {key} did nothing"
            assert app._exception is None
            while app.screen is not target and target in app.screen_stack:  # back to the screen under test
                app.pop_screen()
                await pilot.pause()
            if app.screen is not target:  # esc went back beyond it: open it again for the next key
                await open_screen(app, pilot, keys)
                target = app.screen
            assert_rows_kept(app, f"{name} after {key}")


DETAIL_SCREENS = [s for s in SCREENS if s[0] != "timeline"] + [
    ("layer page", ["g", "enter", "enter"]), ("no row matches", ["g", "slash", *"^no such group$", "enter"])]


@pytest.mark.parametrize(("name", "keys"), DETAIL_SCREENS, ids=[name for name, _ in DETAIL_SCREENS])
async def test_d_shows_or_hides_the_detail_pane_with_one_press_and_it_is_never_empty(session, names_only, name, keys):
    data = names_only if name == "layer page" else session
    app = InspectorApp(session=data, path=SESSION)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(app, pilot, keys)
        panel = app.focused.parent
        assert isinstance(panel, TablePanel)
        box = panel.query_one(".detail-box")
        for _ in range(2):
            shown = box.display
            await pilot.press("d")
            await pilot.pause()
            assert box.display != shown, f"{name}: d needed more than one press"
            if box.display:
                assert box.region.height > 0 and panel.query_one(".table-detail").render().plain.strip()
            assert_rows_kept(app, f"{name} with the detail {'shown' if box.display else 'hidden'}")


async def test_enter_on_a_kernel_row_and_a_layer_field_opens_the_row_in_full(session, names_only):
    from inspector.tui.screens.modals import FactsScreen
    from inspector.tui.screens.tables import KernelsScreen, LayerPageScreen

    for data, screen_class in ((session, KernelsScreen), (names_only, LayerPageScreen)):
        app = InspectorApp(session=data, path=SESSION)
        async with app.run_test(size=SIZE) as pilot:
            await open_screen(app, pilot, ["g", "enter", "enter"])
            assert isinstance(app.screen, screen_class)
            await pilot.press("enter")
            assert isinstance(app.screen, FactsScreen)
            first_key = app.screen_stack[-2].panel.table.cursor_row[0]
            assert app.screen.facts[0][1] == str(first_key)  # the row under the cursor, its first cell in full
            await pilot.press("escape")
            assert isinstance(app.screen, screen_class)


async def test_the_help_lays_its_keys_out_in_columns_on_one_page(session):
    app = InspectorApp(session=session, path=SESSION)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        assert len(app.screen.keys) >= 10
        assert keys.region.height < len(app.screen.keys)  # more than one key a line: columns
        assert keys.region.bottom <= SIZE[1] and keys.region.height > 0  # all of them on the page, none scrolled off
