"""The drill-down screens: groups -> layers -> kernels, flagged layers, all kernels, a diff."""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui import rows
from inspector.tui.screens.modals import FilterScreen
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.diff import SessionDiff
from sessions.groups import Rules
from sessions.model import Session

class TableScreen(Screen):
    """A breadcrumb, one table, a footer; Esc goes back, / filters."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="screen.back"),
        Binding("slash", "filter", "Filter", id="screen.filter"),
        Binding("x", "export_table", "Table to md", id="screen.export_table"),
    ]

    def __init__(self, crumbs: list[str], data: rows.TableData) -> None:
        super().__init__()
        self.crumbs = crumbs
        self.panel = TablePanel(data)

    def compose(self) -> ComposeResult:
        yield Static(" > ".join(self.crumbs), id="breadcrumb")
        yield self.panel
        yield Footer()

    def on_mount(self) -> None:
        self.panel.table.focus()

    def set_crumbs(self, crumbs: list[str]) -> None:
        self.crumbs = crumbs
        self.query_one("#breadcrumb", Static).update(" > ".join(crumbs))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_export_table(self) -> None:
        """The table as shown (filter and order included) to a Markdown file in the working folder."""
        path = Path(f"trt-inspect-{re.sub(r'[^A-Za-z0-9]+', '-', self.crumbs[-1]).strip('-')[:60]}.md")
        path.write_text(f"{' > '.join(self.crumbs)}\n\n{self.panel.markdown()}\n")
        self.notify(f"wrote {path.resolve()}")

    def action_filter(self) -> None:
        self.app.push_screen(FilterScreen(self.panel.pattern), self.panel.filter)


class VariantTableScreen(TableScreen):
    """A table of one variant's data; [ and ] switch the variant."""

    BINDINGS = [
        Binding("left_square_bracket", "variant(-1)", "Prev variant", id="screen.prev_variant"),
        Binding("right_square_bracket", "variant(1)", "Next variant", id="screen.next_variant"),
    ]

    def __init__(self, session: Session, rules: Rules, variant: str, crumbs: list[str]) -> None:
        self.session, self.rules, self.variant_name = session, rules, variant
        super().__init__(crumbs, self.build())

    @property
    def variant(self):
        return self.session.variant(self.variant_name)

    def build(self) -> rows.TableData:
        raise NotImplementedError

    def title_crumb(self) -> str:
        raise NotImplementedError

    def action_variant(self, step: int) -> None:
        names = [v.name for v in self.session.variants if v.status == "ok"]
        self.variant_name = names[(names.index(self.variant_name) + step) % len(names)]
        self.panel.show(self.build())
        self.set_crumbs([*self.crumbs[:-1], self.title_crumb()])


class GroupsScreen(TableScreen):
    BINDINGS = [
        Binding("1", "group_by('role')", "Roles", id="groups.role"),
        Binding("2", "group_by('stage')", "Stages", id="groups.stage"),
        Binding("3", "group_by('kernel')", "Kernel classes", id="groups.kernel"),
        Binding("left_square_bracket", "variant(-1)", "Prev variant", id="screen.prev_variant"),
        Binding("right_square_bracket", "variant(1)", "Next variant", id="screen.next_variant"),
    ]

    def __init__(self, session: Session, rules: Rules, crumbs: list[str], drill_variant: str) -> None:
        self.session, self.rules, self.by = session, rules, "role"
        self.drill_variant = drill_variant
        super().__init__([*crumbs, self._crumb()], rows.groups(session, rules, self.by))

    def _crumb(self) -> str:
        return f"groups by {self.by} (Enter opens {self.drill_variant})"

    def action_group_by(self, by: str) -> None:
        self.by = by
        self.panel.show(rows.groups(self.session, self.rules, by))
        self.set_crumbs([*self.crumbs[:-1], self._crumb()])

    def action_variant(self, step: int) -> None:
        names = [v.name for v in self.session.variants if v.status == "ok"]
        self.drill_variant = names[(names.index(self.drill_variant) + step) % len(names)]
        self.set_crumbs([*self.crumbs[:-1], self._crumb()])

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        if self.by == "kernel":
            self.notify("kernel classes span layers: open a role or stage group to drill into layers")
            return
        self.app.push_screen(LayersScreen(self.session, self.rules, self.drill_variant, event.key, self.by, self.crumbs))


class LayersScreen(VariantTableScreen):
    def __init__(self, session: Session, rules: Rules, variant: str, group: str, by: str, crumbs: list[str]) -> None:
        self.group, self.by = group, by
        super().__init__(session, rules, variant, crumbs)
        self.crumbs = [*crumbs, self.title_crumb()]

    def title_crumb(self) -> str:
        return f"{self.group} in {self.variant_name}"

    def build(self) -> rows.TableData:
        return rows.layers(self.variant, self.rules, self.group, self.by)

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        layer = self.variant.layers[event.key]
        self.app.push_screen(KernelsScreen(self.session, self.rules, self.variant_name, event.key, [*self.crumbs, layer.name]))


class KernelsScreen(VariantTableScreen):
    def __init__(self, session: Session, rules: Rules, variant: str, layer_index: int | None, crumbs: list[str]) -> None:
        self.layer_index = layer_index
        super().__init__(session, rules, variant, crumbs)

    def title_crumb(self) -> str:
        return self.crumbs[-1]

    def build(self) -> rows.TableData:
        return rows.kernels_of_layer(self.variant, self.layer_index)

    def on_mount(self) -> None:
        super().on_mount()
        if self.variant.kernels is None:
            self.notify("this variant has no kernel table (imported TensorRT files hold no kernel launches)")


class AllKernelsScreen(VariantTableScreen):
    def title_crumb(self) -> str:
        return f"all kernels of {self.variant_name}"

    def build(self) -> rows.TableData:
        return rows.all_kernels(self.variant)


class FlagsScreen(TableScreen):
    def __init__(self, session: Session, rules: Rules, crumbs: list[str]) -> None:
        self.session, self.rules = session, rules
        super().__init__([*crumbs, "flagged layers"], rows.flagged(session))

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        variant_name, layer_name = event.key
        variant = self.session.variant(variant_name)
        index = next(i for i, layer in enumerate(variant.layers) if layer.name == layer_name)
        self.app.push_screen(KernelsScreen(self.session, self.rules, variant_name, index, [*self.crumbs, f"{layer_name} in {variant_name}"]))


class DiffScreen(TableScreen):
    def __init__(self, diff: SessionDiff, crumbs: list[str]) -> None:
        self.diff = diff
        verdict = f"{len(diff.regressions)} regression(s)" if diff.regressions else "no regression"
        super().__init__([*crumbs, f"diff ({verdict}, threshold {diff.threshold * 100:g}%)"], rows.diff_rows(diff))
