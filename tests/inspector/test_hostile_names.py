"""Hostile names in every renderer: no control character from a session reaches the terminal (CLI and TUI), and
the TUI shows markup-looking text as written (`sessions.reports.tables.terminal_text`, `inspector.tui.plain.plain`)."""

from __future__ import annotations

import copy
import re

import pytest

from inspector.cli import main
from inspector.tui.app import InspectorApp
from inspector.tui.screens.overview import OverviewScreen
from sessions.documents import storage
from tests.conftest import H200

# Escape sequences (clear screen, set the window title, CSI as C1), a carriage return, a bidi override, Rich markup
# that closes nothing, a live action link.
HOSTILE = "x[/]\x1b]0;pwned\x07\x1b[2J\r\u202e[@click=app.quit]q[/bold]\x9b31m"
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    session = copy.deepcopy(storage.load(H200 / "senet154-h200.json"))
    session.study.model = HOSTILE
    session.environment.gpu.name = HOSTILE
    session.method.timed_region = HOSTILE
    for variant in session.variants:
        if variant.precision == "fp8":
            variant.name = variant.name + HOSTILE
        variant.notes.append(HOSTILE)
        for layer in variant.layers[:5]:
            layer.name = HOSTILE + layer.name
        if variant.kernels is not None:
            variant.kernels.names = [HOSTILE + name for name in variant.kernels.names]
    path = tmp_path_factory.mktemp("hostile") / "hostile.json"
    storage.save(session, path)
    return path, session


@pytest.mark.parametrize("command", [
    ["show", "{s}"], ["groups", "{s}"], ["groups", "{s}", "--by", "kernel"],
    ["diff", str(H200 / "senet154-h200.json"), "{s}"],
    ["diff", "{s}", "{s}", "--format", "md"], ["export", "{s}", "--format", "csv"], ["export", "{s}"],
    ["export", "{s}", "--format", "study"], ["groups", "{s}", "--variant", HOSTILE], ["show", HOSTILE],
])
def test_no_control_character_reaches_the_terminal_from_the_cli(hostile, capsys, command):
    path, _ = hostile
    main([part.format(s=path) for part in command])
    out, err = capsys.readouterr()
    out = out.replace("\r\n", "\n")  # CSV's row end, the file's own bytes (a line end on a terminal too)
    assert not UNSAFE.search(out) and not UNSAFE.search(err), (UNSAFE.findall(out), UNSAFE.findall(err))
    assert "\\x1b" in out + err  # the hostile text is shown, escaped


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_the_tui_shows_hostile_names_as_written_on_every_screen(hostile):
    path, session = hostile
    app = InspectorApp(session=session, path=path)
    async with app.run_test(size=(160, 40)) as pilot:
        seen = []
        for keys in [(), ("g",), ("enter",), ("enter",), ("escape", "escape", "escape", "k"), ("escape", "c"),
                     ("enter",), ("escape", "escape", "f"), ("escape", "e"), ("escape", "g", "slash", *"[/]", "enter")]:
            await pilot.press(*keys)
            await pilot.pause()
            text = screen_text(app)
            assert not UNSAFE.search(text), (keys, UNSAFE.findall(text))
            seen.append(text)
        assert app.is_running and any("x[/]\\x1b]0;pwned\\x07" in text for text in seen)
        await pilot.press("escape", "escape", "escape", "escape")
        assert isinstance(app.screen, OverviewScreen)
