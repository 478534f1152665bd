"""The export formats' registry: the built-in formats in their order, and a new format found by its module alone,
offered by `export --format` and rendered by it."""

from __future__ import annotations

import sys

import pytest

import sessions.reports.exporters as package
from tests.conftest import H200

TOY = '''
from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    return "toy: " + request.one()[1].study.model + "\\n"


EXPORTER = Exporter("toy", render, help="the model's name")
'''


@pytest.fixture
def toy_format(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(TOY)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    package.exporters.cache_clear()
    yield
    package.exporters.cache_clear()
    sys.modules.pop("sessions.reports.exporters.toy", None)


def test_the_built_in_formats_in_their_order():
    assert list(package.exporters()) == ["md", "csv", "json", "study", "matrix", "perfetto"]


def test_a_new_format_is_its_module_alone(toy_format, capsys):
    from inspector.cli import main

    assert list(package.exporters()) == ["md", "csv", "json", "study", "matrix", "perfetto", "toy"]
    assert main(["export", str(H200 / "segformer-b0-probe-b1.json"), "--format", "toy"]) == 0
    assert capsys.readouterr().out == "toy: segformer\n"


def test_an_unknown_format_is_one_line_naming_the_known_ones():
    from sessions.documents.errors import InputError

    with pytest.raises(InputError, match="unknown export format 'nope'; known: md, csv, json, study, matrix"):
        package.exporter("nope")
