"""The drill-down screens: groups -> layers -> kernels, flagged layers, FP8 choices by role, all kernels, two variants
compared, a diff."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui.plain import plain
from inspector.tui.screens.modals import FactsScreen, FilterScreen
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.analyses.diff import SessionDiff
from sessions.analyses.groups import Rules
from sessions.documents.errors import InspectError
from sessions.documents.model import Session, Variant
from sessions.reports import views
from sessions.reports.export import write_new_markdown
from sessions.reports.layer_detail import layer_facts, layer_facts_table

VARIANT_KEYS = Binding.Group("Variant")  # [ and ] under one footer entry
GROUP_KEYS = Binding.Group("Group by")  # 1 2 3 under one footer entry
ONE_VARIANT = "no other variant to switch to: this session has one that finished here"


def ok_variants(session: Session) -> list[str]:
    return [v.name for v in session.variants if v.status == "ok"]


def open_layer(app: App, session: Session, rules: Rules, variant: str, layer: str, crumbs: list[str]) -> None:
    """A layer's kernels; where its variant recorded none (imported engines), the layer's page."""
    if session.variant(variant).kernels is None:
        app.push_screen(LayerPageScreen(session, rules, variant, layer, crumbs))
    else:
        app.push_screen(KernelsScreen(session, rules, variant, layer, crumbs))


class TableScreen(Screen):
    """A breadcrumb, one table, its notes, a footer; Esc goes back, / filters, x exports the table as shown."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="screen.back"),
        Binding("slash", "filter", "Filter", id="screen.filter"),
        Binding("x", "export_table", "Export", id="screen.export_table"),
    ]
    DETAIL = False

    def __init__(self, crumbs: list[str], data: views.Table) -> None:
        super().__init__()
        self.crumbs = crumbs
        self.panel = TablePanel(data, detail=self.DETAIL, facts=self.row_facts)

    def row_facts(self, key: Any) -> list[tuple[str, str]]:
        """What the detail pane shows for the row `key`: its cells in full, unless a screen knows more."""
        row = next((r for r, k in zip(self.panel.data.rows, self.panel.data.keys, strict=False) if k == key), None)
        return views.row_detail(self.panel.data, row) if row is not None else []

    def compose(self) -> ComposeResult:
        yield Static(plain(" > ".join(self.crumbs)), id="breadcrumb")
        yield self.panel
        yield Static(plain(*self.panel.data.notes), id="notes")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.panel.table.focus()

    def show(self, data: views.Table, crumbs: list[str] | None = None) -> None:
        """New data and the title that names it, in one step: the title never describes other rows."""
        self.panel.show(data)
        if crumbs is not None:
            self.crumbs = crumbs
        self.query_one("#breadcrumb", Static).update(plain(" > ".join(self.crumbs)))
        self.query_one("#notes", Static).update(plain(*data.notes))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_export_table(self) -> None:
        """The table as shown (filter and order included), a new Markdown file in the exports folder."""
        text = f"{' > '.join(self.crumbs)}\n\n{self.panel.markdown()}\n"
        try:
            path = write_new_markdown(text, self.crumbs[0], self.panel.data.title or self.crumbs[-1])
        except InspectError as exc:
            self.notify(exc.message, severity="error", markup=False)
            return
        self.notify(f"wrote {path}", markup=False)

    def action_filter(self) -> None:
        self.app.push_screen(FilterScreen(self.panel.pattern), self.panel.filter)

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        self.open_row(event.key)

    def open_row(self, key: Any) -> None:
        """What Enter opens: by default the row in full (a kernel, a field, a diff row); drill screens go deeper."""
        self.app.push_screen(FactsScreen(" > ".join(self.crumbs), self.row_facts(key)))


class VariantTableScreen(TableScreen):
    """A table of one variant's data; [ and ] switch the variant, and the title with it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "variant(-1)", "Prev variant", id="screen.prev_variant", group=VARIANT_KEYS),
        Binding("right_square_bracket", "variant(1)", "Next variant", id="screen.next_variant", group=VARIANT_KEYS),
    ]

    def __init__(self, session: Session, rules: Rules, variant: str, crumbs: list[str]) -> None:
        self.session, self.rules, self.variant_name = session, rules, variant
        self.base_crumbs = crumbs
        data = self.build()
        super().__init__([*crumbs, data.title], data)

    @property
    def variant(self) -> Variant:
        return self.session.variant(self.variant_name)

    def build(self) -> views.Table:
        raise NotImplementedError

    def action_variant(self, step: int) -> None:
        names = ok_variants(self.session)
        if len(names) < 2:
            self.notify(ONE_VARIANT)
            return
        self.variant_name = names[(names.index(self.variant_name) + step) % len(names)]
        data = self.build()
        self.show(data, [*self.base_crumbs, data.title])


class GroupsScreen(TableScreen):
    """Groups of one variant beside its baseline, sorted by that variant's delta; [ ] lead with another variant."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "group_by('role')", "Roles", id="groups.role", group=GROUP_KEYS),
        Binding("2", "group_by('stage')", "Stages", id="groups.stage", group=GROUP_KEYS),
        Binding("3", "group_by('kernel')", "Kernel classes", id="groups.kernel", group=GROUP_KEYS),
        Binding("left_square_bracket", "variant(-1)", "Prev variant", id="screen.prev_variant", group=VARIANT_KEYS),
        Binding("right_square_bracket", "variant(1)", "Next variant", id="screen.next_variant", group=VARIANT_KEYS),
    ]

    def __init__(self, session: Session, rules: Rules, crumbs: list[str], drill_variant: str) -> None:
        self.session, self.rules, self.by = session, rules, "role"
        self.drill_variant = drill_variant
        self.base_crumbs = crumbs
        data = self._build()
        super().__init__([*crumbs, self._crumb(data)], data)

    def _build(self) -> views.Table:
        """The led variant beside its baseline; a session with one finished variant shows that one alone."""
        pair = views.pair_of(self.session, self.drill_variant)
        if pair is None:
            return views.group_table(self.session, self.rules, self.by)
        self.drill_variant = pair[1]
        return views.group_pair_table(self.session, self.rules, self.by, *pair)

    def _crumb(self, data: views.Table) -> str:
        return f"groups: {data.title or self.by} (Enter opens {self.drill_variant})"

    def _rebuild(self) -> None:
        data = self._build()
        self.show(data, [*self.base_crumbs, self._crumb(data)])

    def action_group_by(self, by: str) -> None:
        if by == self.by:  # the key is never silent
            self.notify(f"already grouped by {by}")
            return
        self.by = by
        self._rebuild()

    def action_variant(self, step: int) -> None:
        names = ok_variants(self.session)
        leaders = len(names) - (views.pair_of(self.session, self.drill_variant) is not None)  # the baseline leads none
        if leaders < 2:
            self.notify(ONE_VARIANT)
            return
        self.drill_variant = names[(names.index(self.drill_variant) + step) % len(names)]
        pair = views.pair_of(self.session, self.drill_variant)
        if pair is not None and pair[1] != self.drill_variant:  # the baseline leads nothing: step past it
            self.drill_variant = names[(names.index(self.drill_variant) + step) % len(names)]
        self._rebuild()

    def open_row(self, key: Any) -> None:
        """A role or stage: its layers; a kernel class (it spans layers): the row in full."""
        if self.by == "kernel":
            super().open_row(key)
            return
        self.app.push_screen(LayersScreen(self.session, self.rules, self.drill_variant, key, self.by, self.crumbs))


class LayersScreen(VariantTableScreen):
    """The layers of one group; the detail pane holds the layer in full (tactic, formats, reformats, precision)."""

    DETAIL = True

    def __init__(self, session: Session, rules: Rules, variant: str, group: str, by: str, crumbs: list[str]) -> None:
        self.group, self.by = group, by
        super().__init__(session, rules, variant, crumbs)

    def build(self) -> views.Table:
        return views.layer_table(self.session, self.variant, self.rules, self.group, self.by)

    def row_facts(self, key: Any) -> list[tuple[str, str]]:
        index = views.layer_index(self.variant, key)
        return layer_facts(self.variant, self.variant.layers[index]) if index is not None else []

    def open_row(self, key: Any) -> None:
        """A layer's kernels; where none were recorded (imported engines), the layer's page."""
        open_layer(self.app, self.session, self.rules, self.variant_name, key, self.crumbs)


class LayerPageScreen(VariantTableScreen):
    """One layer field by field (tactic, tensors, reformats, precision as run and as asked): the drill of a
    layer without kernels; [ ] show the same layer in the other variants."""

    def __init__(self, session: Session, rules: Rules, variant: str, layer: str, crumbs: list[str]) -> None:
        self.layer_name = layer
        super().__init__(session, rules, variant, crumbs)

    def build(self) -> views.Table:
        index = views.layer_index(self.variant, self.layer_name)
        if index is None:
            return views.absent_layer(self.variant_name, self.layer_name)
        return layer_facts_table(self.variant, self.variant.layers[index])


class KernelsScreen(VariantTableScreen):
    """The kernels of one layer, found by name in whichever variant [ and ] select."""

    DETAIL = True

    def __init__(self, session: Session, rules: Rules, variant: str, layer: str | None, crumbs: list[str]) -> None:
        self.layer_name = layer
        super().__init__(session, rules, variant, crumbs)

    def build(self) -> views.Table:
        return views.kernel_table(self.session, self.variant, self.layer_name)


class AllKernelsScreen(VariantTableScreen):
    DETAIL = True

    def build(self) -> views.Table:
        return views.all_kernels_table(self.session, self.variant)


class FlagsScreen(TableScreen):
    def __init__(self, session: Session, rules: Rules, crumbs: list[str]) -> None:
        self.session, self.rules = session, rules
        super().__init__([*crumbs, "flagged layers"], views.flag_table(session))

    def open_row(self, key: Any) -> None:
        """The flagged layer's kernels, or its page where none were recorded."""
        variant_name, layer_name = key
        open_layer(self.app, self.session, self.rules, variant_name, layer_name, self.crumbs)


class PrecisionScreen(TableScreen):
    """What the layers each recipe asked for in FP8 ran, by variant and role; Enter: that variant's groups."""

    def __init__(self, session: Session, rules: Rules, crumbs: list[str]) -> None:
        self.session, self.rules = session, rules
        super().__init__([*crumbs, "FP8 choices"], views.precision_table(session, rules))

    def open_row(self, key: Any) -> None:
        variant_name, _role = key
        self.app.push_screen(GroupsScreen(self.session, self.rules, self.crumbs, variant_name))


class CompareScreen(TableScreen):
    """Two variants layer by layer (delta ms, delta kernels, costliest first); Enter: both kernel lists."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "variant(-1)", "Prev variant", id="screen.prev_variant", group=VARIANT_KEYS),
        Binding("right_square_bracket", "variant(1)", "Next variant", id="screen.next_variant", group=VARIANT_KEYS),
    ]

    def __init__(self, session: Session, rules: Rules, a: str, b: str, crumbs: list[str]) -> None:
        self.session, self.rules, self.a, self.b, self.base_crumbs = session, rules, a, b, crumbs
        data = views.comparison_table(session, a, b, rules)
        super().__init__([*crumbs, data.title], data)

    def action_variant(self, step: int) -> None:
        names = [n for n in ok_variants(self.session) if n != self.a]
        if len(names) < 2 and self.b in names:
            self.notify(ONE_VARIANT)
            return
        self.b = names[(names.index(self.b) + step) % len(names)] if self.b in names else names[0]
        data = views.comparison_table(self.session, self.a, self.b, self.rules)
        self.show(data, [*self.base_crumbs, data.title])

    def open_row(self, key: Any) -> None:
        pair: views.LayerPair = key
        self.app.push_screen(SideBySideScreen(self.session, self.a, self.b, pair, self.crumbs))


class SideBySideScreen(Screen):
    """The kernels of one layer in A (left) and B (right)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back", id="screen.back"),
                Binding("tab", "other_side", "Other side", id="sides.switch")]

    def __init__(self, session: Session, a: str, b: str, pair: views.LayerPair, crumbs: list[str]) -> None:
        super().__init__()
        name = pair.b or pair.a or ""
        self.left = views.kernel_table(session, session.variant(a), pair.a) if pair.a else views.absent_layer(a, name)
        self.right = views.kernel_table(session, session.variant(b), pair.b) if pair.b else views.absent_layer(b, name)
        self.crumbs = [*crumbs, name]

    def compose(self) -> ComposeResult:
        yield Static(plain(" > ".join(self.crumbs)), id="breadcrumb")
        with Horizontal(id="sides"):
            for data in (self.left, self.right):
                with Vertical(classes="side"):
                    yield Static(plain(f"{data.title}: " + ("; ".join(data.notes) or f"{len(data.rows)} kernel names")),
                                 classes="side-title")
                    yield TablePanel(data, detail=True)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        """The first side with kernels takes the keys (a layer absent from A leaves the left side empty)."""
        panels = list(self.query(TablePanel))
        next((p for p in panels if p.data.rows), panels[0]).table.focus()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_other_side(self) -> None:
        """The keys move to the other side's table, empty or not (an empty one says why)."""
        panels = list(self.query(TablePanel))
        other = panels[1] if self.focused is panels[0].table else panels[0]
        other.table.focus()
        if not other.data.rows:
            self.notify(f"{other.data.title}: " + ("; ".join(other.data.notes) or "no kernels"), markup=False)

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        """Enter on a kernel of either side: its row in full."""
        panel = next(p for p in self.query(TablePanel) if p.table is event.table)
        row = next(r for r, k in zip(panel.data.rows, panel.data.keys, strict=False) if k == event.key)
        self.app.push_screen(FactsScreen(" > ".join([*self.crumbs, panel.data.title]),
                                         views.row_detail(panel.data, row)))


class DiffScreen(TableScreen):
    """A saved-session diff, built from `sessions.analyses.diff.SessionDiff` (the same result `diff` prints); A, B
    and notes above."""

    def __init__(self, diff: SessionDiff, crumbs: list[str]) -> None:
        self.diff = diff
        verdict = f"{len(diff.regressions)} regression(s)" if diff.regressions else "no regression"
        super().__init__([*crumbs, f"diff ({verdict}, threshold {diff.threshold * 100:g}%)"], views.diff_table(diff))
