"""The attack review (docs/evidence/attack-defects.md), defects 7, 8, 14 and 16: crafted names, bad model inputs,
names that are paths, misleading messages.

Each case runs the CLI as a user would and checks the output's structure or the one error line.
"""

from __future__ import annotations

import copy
import re

import pytest

from sessions.documents import storage
from sessions.reports.tables import markdown_table_problems
from tests.conftest import H200, run_cli, run_cli_process
from tests.sessions.latency_edits import moved

# A name that tries every way out of a Markdown cell or line: row and line breaks, a pipe, a heading,
# a list item, a link label, a code fence and raw HTML.
EVIL = "x\r\n# Injected heading\n| a | b |\r<script>alert(1)</script>\x0b1. [l]: http://e\n```\n- item"


def evil_session(tmp_path, name: str = "evil.json"):
    """The H200 session with session-supplied strings crafted: model, variant, layer, GPU, notes, method, command."""
    session = copy.deepcopy(storage.load(H200 / "senet154-h200.json"))
    session.study.model = EVIL
    session.study.command = [*session.study.command, EVIL]
    session.environment.gpu.name = EVIL
    session.method.timed_region = EVIL
    for variant in session.variants:
        if variant.precision == "fp8":
            variant.name = f"{variant.name}{EVIL}"
        variant.notes.append(EVIL)
        for layer in variant.layers:
            if layer.name == "layer1.0.conv2":  # a flagged layer: it reaches the flag table and the study's bullets
                layer.name = EVIL + "layer1.0.conv2"
    path = tmp_path / name
    storage.save(session, path)
    return path, session


def outside_fences(text: str) -> list[str]:
    lines, fence = [], None
    for line in text.splitlines():
        marker = re.match(r"^(`{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            lines.append(line)
    assert fence is None, "a code fence is left open"
    return lines


def tables(lines: list[str]) -> list[list[str]]:
    found, current = [], []
    for line in [*lines, ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


def assert_safe_markdown(text: str, headings: set[str]) -> list[list[str]]:
    """Well-formed tables, no heading, row or raw HTML made by data; returns the tables' lines."""
    assert markdown_table_problems(text) == []
    assert "\r" not in text and "\x0b" not in text
    lines = outside_fences(text)
    from_data = [line for line in lines if line.lstrip().startswith("#") and line not in headings]
    assert from_data == [], "a heading from data"
    assert not [line for line in lines if re.match(r"\s*(- item|1\. |\[l\]:|\| a \| b \|)", line)], "a block from data"
    assert "<script>" not in "\n".join(lines)
    return tables(lines)


def headings_of(text: str) -> set[str]:
    """The section headings the writer puts there itself (constant text after the hashes)."""
    return {line for line in text.splitlines() if re.fullmatch(r"#{1,3} [A-Za-z0-9 ,/().:-]+", line)} | {
        line for line in text.splitlines() if line.startswith(("# x", "## FP8 quantization study: x", "## Sweep: x"))}


def test_crafted_names_cannot_change_the_markdown_export(tmp_path):
    path, session = evil_session(tmp_path)
    result = run_cli("export", str(path), "--format", "md")
    assert result.returncode == 0, result.stderr
    found = assert_safe_markdown(result.stdout, headings_of(result.stdout))
    comparison = found[0]
    assert len(comparison) == 2 + len(session.variants)  # header, separator, one row per variant
    assert "&lt;script&gt;" in result.stdout
    rerun = result.stdout.split("## Rerun", 1)[1].splitlines()
    assert rerun[2].endswith("$'x\\x0d\\x0a# Injected heading\\x0a| a | b |\\x0d<script>alert(1)</script>\\x0b1. [l]: "
                             "http://e\\x0a```\\x0a- item'")  # the recorded command, one line that bash reads back


def test_crafted_names_cannot_change_the_markdown_diff(tmp_path):
    a, _ = evil_session(tmp_path, "a.json")
    b, _ = evil_session(tmp_path, "b.json")
    changed = storage.load(b)
    for variant in changed.variants:  # every variant regresses: the head table lists them all
        lat = variant.latency
        moved(lat, 2.0)
    storage.save(changed, b)
    result = run_cli("diff", str(a), str(b), "--format", "md")
    assert result.returncode == 1, result.stderr  # the regression
    assert "Traceback" not in result.stderr
    assert_safe_markdown(result.stdout, set())
    assert "&lt;script&gt;" in result.stdout


def test_crafted_names_cannot_change_the_study_and_matrix_exports(tmp_path):
    a, _ = evil_session(tmp_path, "a.json")
    b, _ = evil_session(tmp_path, "b.json")
    changed = storage.load(b)
    changed.study.batch = 8
    storage.save(changed, b)
    study = run_cli("export", str(a), str(b), "--format", "study")
    assert study.returncode == 0, study.stderr
    assert_safe_markdown(study.stdout, headings_of(study.stdout))
    matrix = run_cli("export", str(a), str(b), "--format", "matrix")
    assert matrix.returncode == 0, matrix.stderr
    assert_safe_markdown(matrix.stdout, headings_of(matrix.stdout))


def test_the_markdown_escapes_keep_text_readable():
    from sessions.reports.tables import md_cell, md_code, md_fence, md_text

    assert md_cell("a|b <i> & c\nd") == "a\\|b &lt;i&gt; &amp; c d"
    assert md_text("# heading") == "\\# heading" and md_text("1. item") == "1\\. item"
    assert md_text("layer1.0") == "layer1.0"
    assert md_code("layer1.0.conv2") == "`layer1.0.conv2`" and md_code("a`b") == "a\\`b"
    assert md_fence(["echo ```"]) == "````\necho ```\n````"


def test_a_command_with_a_newline_stays_one_line_that_bash_reads_back():
    import subprocess

    from sessions.reports.sections import shell_line

    line = shell_line(["printf", "%s|", "a\nb", "it's", "caf\xe9"])
    assert line == "printf '%s|' $'a\\x0ab' 'it'\"'\"'s' 'caf\xe9'"
    ran = subprocess.run(["bash", "-c", line], check=False, capture_output=True, text=True)
    assert ran.stdout == "a\nb|it's|caf\xe9|"


# Defect 8: model inputs give one line and exit 2, never a traceback.

def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if not line.startswith("trt-inspect: [")]  # progress lines are not errors
    assert len(errors) == 1 and errors[0].startswith("trt-inspect: error:") and "Traceback" not in "".join(err), err
    return errors[0]


def run_small(model: str, *options: str) -> int:
    from inspector.cli import main

    return main(["run", model, "--device", "cpu", "--variants", "fp32", "--tracer", "none", "--rounds", "1",
                 "--iters", "1", "--warmup", "0", "--calib-count", "1", *options])


def write_checkpoint(path, content) -> None:
    import torch

    if content is None:
        path.write_bytes(b"")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)


def _checkpoints():
    import pickle

    import torch

    class Evil:
        def __reduce__(self):
            return (exec, ("open('PWNED', 'w')",))

    return {
        "empty file": (None, "is empty (0 bytes)"),
        "empty dict": ({}, "holds no weights"),
        "wrong shape": ({"conv1.0.weight": torch.zeros(3, 3)}, "conv1.0.weight is 3 x 3 in the file"),
        "non-string keys": ({1: torch.zeros(3)}, "key 1 is not a parameter name"),
        "not tensors": ({"conv1.0.weight": "text"}, "'conv1.0.weight' is a str, not a tensor"),
        "a pickle of objects": (pickle.dumps({"x": Evil()}), "arbitrary pickles are never loaded"),
    }


@pytest.mark.parametrize("case", list(_checkpoints()))
def test_a_bad_checkpoint_is_one_line(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    content, message = _checkpoints()[case]
    path = tmp_path / "weights.pt"
    write_checkpoint(path, content)
    assert run_small("test_resnet", "--checkpoint", str(path), "--out", str(tmp_path / "s.json")) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "s.json").exists()


def tiny_segformer(folder, extra_key: bool = False) -> None:
    import torch
    import transformers

    config = transformers.SegformerConfig(depths=[1, 1, 1, 1], hidden_sizes=[8, 8, 8, 8], decoder_hidden_size=8,
                                          num_labels=3, image_size=32)
    model = transformers.SegformerForSemanticSegmentation(config)
    state = {**model.state_dict(), **({"extra.weight": torch.zeros(1)} if extra_key else {})}
    model.save_pretrained(folder, state_dict=state)


@pytest.mark.parametrize("config, message", [
    ('{"model_type": ["segformer"]}', "config.json is malformed: model_type is list, not a name"),
    ('{"model_type": "segformer",\n',
     "config.json is malformed: Expecting property name enclosed in double quotes at line 2"),
    ("[1, 2]", "config.json is malformed: a JSON object is expected, not list"),
])
def test_a_bad_hugging_face_config_is_one_line_that_says_malformed(config, message, tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(config)
    assert run_small(str(folder)) == 2
    line = one_error_line(capsys)
    assert message in line and "not in the local Hugging Face cache" not in line


def test_a_config_json_too_large_is_refused_before_it_is_read(tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    with (folder / "config.json").open("wb") as file:
        file.write(b'{"model_type": "segformer", "pad": "')
        file.truncate(3 << 20)  # 3 MiB (sparse): what a config.json never is
    assert run_small(str(folder)) == 2
    assert "over the 1 MiB a config.json may have" in one_error_line(capsys)


def test_a_malformed_config_in_the_hub_cache_is_not_called_missing(tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants

    snapshot = tmp_path / "hub" / "models--acme--vision" / "snapshots" / "0123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{oops")
    (tmp_path / "hub" / "models--acme--vision" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--vision" / "refs" / "main").write_text("0123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert run_small("acme/vision") == 2
    assert ("config.json is malformed: Expecting property name enclosed in double quotes at line 1, column 2"
            in one_error_line(capsys))


def test_a_hugging_face_bin_that_is_not_plain_tensors_is_one_line_and_never_runs(tmp_path, monkeypatch, capsys):
    import pickle

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "model"
    tiny_segformer(folder)
    (folder / "model.safetensors").unlink()

    class Evil:
        def __reduce__(self):
            return (exec, ("open('PWNED', 'w')",))

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"x": Evil()}))
    capsys.readouterr()  # transformers' progress bar of the save above, where it loaded before the CLI's settings
    assert run_small(str(folder)) == 2
    assert "cannot load the weights in" in one_error_line(capsys)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.slow
def test_a_hugging_face_folder_with_a_bin_loads_as_its_architecture(tmp_path):
    import torch
    from safetensors.torch import load_file

    folder = tmp_path / "model"
    tiny_segformer(folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    # a fresh process: the libraries' progress bars are quieted as the process starts, as a user's run is
    result = run_cli_process("run", str(folder), "--device", "cpu", "--variants", "fp32", "--tracer", "none",
                             "--rounds", "1", "--iters", "1", "--warmup", "0", "--calib-count", "1",
                             "--out", str(tmp_path / "s.json"))
    assert result.returncode == 0, result.stderr
    assert all(line.startswith("trt-inspect: ") for line in result.stderr.splitlines()), result.stderr
    assert storage.load(tmp_path / "s.json").variants[0].quality.task == "segmentation"  # not a classifier, random head


@pytest.mark.parametrize("side", [20000, 10000])  # PIL raises past 179 million pixels, and warns past 89 million
def test_a_decompression_bomb_image_is_one_line(side, tmp_path, capsys):
    from PIL import Image

    (tmp_path / "images").mkdir()
    Image.new("1", (side, side)).save(tmp_path / "images" / "big.png")  # 48 kB on disk for 400 million pixels
    assert run_small("test_resnet", "--images", str(tmp_path / "images")) == 2
    assert "refused as a possible decompression bomb" in one_error_line(capsys)


def test_an_error_with_an_empty_message_still_says_what_it_is(monkeypatch, capsys):
    from inspector import cli
    from inspector.study import one_line
    from sessions.documents.errors import InputError, first_line

    assert first_line(EOFError()) == "EOFError" and first_line(ValueError("\n  \nsecond")) == "second"
    assert one_line(RuntimeError("")) == "RuntimeError" and one_line(RuntimeError("\nboom")) == "RuntimeError: boom"
    assert one_line(InputError("bad\nmore")) == "bad"

    def fails(args):
        raise InputError("")

    monkeypatch.setitem(cli.COMMANDS, "sessions", fails)
    assert cli.main(["sessions"]) == 2
    assert one_error_line(capsys) == "trt-inspect: error: InputError"


# Defect 14: names are names, not paths.

@pytest.mark.parametrize("name", ["../../../../p/x", "a/b", "..", "a" * 300, "é" * 150, "", "a\x00b", "a\nb"])
def test_a_name_that_is_a_path_is_refused_before_any_work(name, tmp_path, monkeypatch, capsys, isolated_home):
    from inspector.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "layers.json").write_text('{"Layers": ["conv1"]}')
    with pytest.raises(SystemExit) as stopped:
        main(["import", "--layers", "layers.json", "--name", name])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --name: " in err[0], err
    assert not isolated_home.exists()  # nothing written: the sessions folder is not even made


def test_an_imported_session_with_a_plain_name_is_listed(tmp_path, monkeypatch, capsys):
    from inspector.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "layers.json").write_text('{"Layers": ["conv1"]}')
    assert main(["import", "--layers", "layers.json", "--name", "my fp8 engine"]) == 0
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    assert "my fp8 engine" in capsys.readouterr().out


def test_a_sweep_name_that_is_a_path_is_refused(tmp_path, capsys):
    from inspector.cli import main

    matrix = tmp_path / "m.toml"
    matrix.write_text('[sweep]\nname = "../../escape"\n[base]\nmodel = "resnet18"\ndevice = "cpu"\n'
                      '[axes]\nbatch = [1]\n')
    assert main(["sweep", str(matrix), "--dry-run"]) == 2
    assert "[sweep] name: '../../escape' is a path, not a name" in one_error_line(capsys)


# Defect 16: messages that say what is wrong, and stderr that holds only our lines.

def test_an_unknown_recipe_in_variants_is_refused_before_the_model_is_built(monkeypatch, capsys):
    import builders.models.catalog

    monkeypatch.setattr(builders.models.catalog, "load_model", lambda *a, **k: pytest.fail("the model was built"))
    assert run_small("resnet18", "--variants", "fp32,fp8-bogus") == 2
    line = one_error_line(capsys)
    assert "unknown FP8 recipe 'bogus'; known: all, no-se" in line


def test_library_warnings_stay_off_stderr_unless_verbose():
    import subprocess
    import sys

    script = ("import logging, warnings, sys\n"
              "from inspector import process\n"
              "process.quiet_libraries()\n"
              "process.show_library_warnings(sys.argv[1] == '-v')\n"
              "for _ in range(3):\n"
              "    warnings.warn('a library UserWarning', UserWarning)\n"
              "    warnings.warn('a library FutureWarning', FutureWarning)\n"
              "logging.getLogger('transformers.modeling_utils').warning('a load report')\n"
              "logging.getLogger('timm').error('a library error')\n")
    quiet = subprocess.run([sys.executable, "-c", script, "-"], check=False, capture_output=True, text=True)
    assert quiet.stderr == "a library error\n"
    verbose = subprocess.run([sys.executable, "-c", script, "-v"], check=False, capture_output=True, text=True)
    assert verbose.stderr.count("a library UserWarning") == 1 and verbose.stderr.count("a library FutureWarning") == 1
    assert "a load report" in verbose.stderr


@pytest.mark.slow
def test_a_hugging_face_load_report_is_shown_only_with_verbose(tmp_path):
    folder = tmp_path / "model"
    tiny_segformer(folder, extra_key=True)  # transformers reports the unexpected key as a warning
    common = ["run", str(folder), "--device", "cpu", "--variants", "fp32", "--tracer", "none", "--rounds", "1",
              "--iters", "1", "--warmup", "0", "--calib-count", "1"]
    quiet = run_cli_process(*common, "--out", str(tmp_path / "a.json"))
    assert quiet.returncode == 0, quiet.stderr
    assert [line for line in quiet.stderr.splitlines() if not line.startswith("trt-inspect: ")] == []
    verbose = run_cli_process(*common, "--out", str(tmp_path / "b.json"), "-v")
    assert verbose.returncode == 0 and "LOAD REPORT" in verbose.stderr


# Defects fixed earlier whose reproduction had no test of its own.

def test_a_raw_trace_path_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")  # defect 5: --raw-trace at a file lost the traced variant
    assert run_small("test_resnet", "--raw-trace", str(tmp_path / "afile"), "--out", str(tmp_path / "s.json")) == 2
    assert "--raw-trace" in one_error_line(capsys) and not (tmp_path / "s.json").exists()


def test_export_to_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch, capsys):
    import os

    from inspector.cli import main

    target = tmp_path / "report.md"
    target.write_text("the old report\n")
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fd, mode):
            self.file = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, text):
            self.file.write(text[: len(text) // 2])  # defect 9: half a report, then the disk is full
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdopen", FullDisk)
    assert main(["export", str(H200 / "senet154-h200.json"), "-o", str(target), "--force"]) == 2
    assert "No space left on device" in one_error_line(capsys)
    assert target.read_text() == "the old report\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_diff_is_linear_in_the_variants():
    import time

    from sessions.analyses.diff import diff_sessions
    from sessions.analyses.groups import load_rules
    from sessions.reports.diff_report import diff_text

    session = storage.load(H200 / "senet154-h200.json")  # defect 12: 20,000 variants took 194 s
    template = copy.copy(session.variants[0])
    template.layers, template.kernels = [], None
    many = copy.copy(session)
    many.variants = [copy.copy(template) for _ in range(20000)]
    for index, variant in enumerate(many.variants):
        variant.name = f"v{index}"
    started = time.perf_counter()
    diff = diff_sessions(many, many, load_rules(), 0.05, "a", "b")
    diff_text(diff, markdown=True)
    assert len(diff.pairs) == 20000 and time.perf_counter() - started < 8  # about 0.5 s; quadratic was over 30 s


def test_a_diff_against_renamed_layers_compares_no_per_group_split(tmp_path):
    """D25: with no layer paired, every per-group split of B was called new: 9 REGRESSION rows, exit 1."""
    a = H200 / "senet154-mainjob-warm.json"  # three per-group splits in each of its three FP8 and fp16 variants
    renamed = storage.load(a)
    for variant in renamed.variants:
        for layer in variant.layers:
            layer.name, layer.op = f"renamed.{layer.name}", None  # nothing left to pair by: name, nodes, shape
    b = tmp_path / "renamed.json"
    storage.save(renamed, b)
    result = run_cli("diff", str(a), str(b))
    assert result.returncode == 0, result.stdout  # the same latency and kernels: nothing regressed
    assert " split " not in result.stdout
    assert result.stdout.count("0 layers paired") == 4
    assert result.stdout.count("no layer paired: layer times, kernels, precisions and per-group splits "
                               "not compared") == 4
    for variant in renamed.variants:
        for layer, original in zip(variant.layers, storage.load(a).variant(variant.name).layers, strict=False):
            layer.op = original.op  # paired again, by shape and order: each split meets the split it was in A
    storage.save(renamed, b)
    paired = run_cli("diff", str(a), str(b))
    assert paired.returncode == 0 and " split " not in paired.stdout and "0 layers paired" not in paired.stdout


def test_a_times_file_of_1e308_leaves_the_session_it_was_to_join_readable(tmp_path, capsys):
    import orjson

    from inspector.cli import main

    seeds = H200.parent / "fuzz"  # defect 1: computeMs 1e308 --into good.json made every variant unreadable
    good = tmp_path / "good.json"
    assert main(["import", "--layers", str(seeds / "trt10.layers.json"), "--out", str(good)]) == 0
    before = good.read_bytes()
    times = orjson.loads((seeds / "trt10.times.json").read_bytes())
    for record in times:
        record["computeMs"] = record["latencyMs"] = 1e308
    (tmp_path / "t.json").write_bytes(orjson.dumps(times))
    capsys.readouterr()
    assert main(["import", "--layers", str(seeds / "trt10.layers.json"), "--times", str(tmp_path / "t.json"),
                 "--name", "again", "--into", str(good)]) == 2
    assert "computeMs = 1e+308" in one_error_line(capsys)
    assert good.read_bytes() == before and storage.load(good).variants[0].name == "trt10"


@pytest.mark.parametrize("text, message", [
    ('[[roles]]\nname = "x"\nnames = ["(unclosed"]\n', "roles[0].names: bad regular expression"),
    ("stages = 5\n", "stages must be a table"),
    ('[stages]\npattern = 5\n', "stages.pattern must be a regular expression"),
    ('[[role]]\nname = "x"\n', "unknown keys ['role']"),
])
def test_a_rules_file_of_a_bad_shape_is_one_line(tmp_path, capsys, text, message):
    from inspector.cli import main

    rules = tmp_path / "rules.toml"  # defect 11
    rules.write_text(text)
    assert main(["groups", str(H200 / "senet154-h200.json"), "--groups", str(rules)]) == 2
    assert message in one_error_line(capsys)


def test_text_tables_print_no_control_character_from_a_name():
    from sessions.reports.tables import render_text

    text = render_text(["layer", "ms"], [["conv\x1b[2J\rhidden\nrow", 1.5]])
    assert "\x1b" not in text and "\r" not in text and len(text.splitlines()) == 3


def _rounds_of_one_and_a_half(tmp_path) -> list[str]:
    import orjson

    doc = orjson.loads((H200 / "senet154-arch.json").read_bytes())  # defect 3: rerun ran minutes, then crashed
    doc["study"]["plan"]["timing"]["rounds"] = 1.5
    (tmp_path / "r.json").write_bytes(orjson.dumps(doc))
    return ["rerun", str(tmp_path / "r.json")]


@pytest.mark.parametrize(("argv", "message"), [
    (lambda tmp: _rounds_of_one_and_a_half(tmp), "plan.timing.rounds: expected an integer"),
    (lambda tmp: ["show", "/dev/zero"], "is not a regular file"),  # defect 12: read until memory ran out
    (lambda tmp: ["run", "test_resnet", "--device", "cpu", "--warmup", "1e308"], "--warmup must be between"),  # hung
])
def test_a_fractional_stored_round_an_endless_file_and_an_endless_warmup_are_one_line(argv, message, tmp_path, capsys):
    from inspector.cli import main

    assert main(argv(tmp_path)) == 2
    assert message in one_error_line(capsys)


def test_a_hugging_face_folder_builds_on_the_meta_device_for_the_recipe_preflight(tmp_path):
    import torch

    from builders.models.catalog import load_model

    tiny_segformer(tmp_path / "model")  # transformers refuses from_pretrained there: the structure needs no weights
    with torch.device("meta"):
        model = load_model(str(tmp_path / "model"))
    assert type(model.module.model).__name__ == "SegformerForSemanticSegmentation"


def test_a_malformed_cached_config_of_a_segformer_id_is_not_built_from_the_table(tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants

    repo = tmp_path / "hub" / "models--nvidia--segformer-b0-finetuned-ade-512-512"
    (repo / "snapshots" / "0123").mkdir(parents=True)
    (repo / "snapshots" / "0123" / "config.json").write_text('{"model_type": ["segformer"]}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert run_small("nvidia/segformer-b0-finetuned-ade-512-512") == 2
    assert "config.json is malformed: model_type is list" in one_error_line(capsys)


def test_a_model_type_transformers_cannot_build_from_its_config_is_named_in_full_and_not_called_weights(
        monkeypatch, capsys):
    """hf:levit and hf:deit: transformers' from_config raised ('NoneType' object is not iterable) and the line said
    the weights did not load, of "levit", where no weights are loaded. A stand-in from_config raises as theirs did."""
    import transformers

    def refuses(config, **kwargs):
        raise TypeError("'NoneType' object is not iterable")

    monkeypatch.setattr(transformers.AutoModelForImageClassification, "from_config", refuses)
    assert run_small("hf:vit") == 2
    line = one_error_line(capsys)
    assert line == ("trt-inspect: error: cannot build hf:vit from its config (transformers' "
                    "AutoModelForImageClassification.from_config, random weights): 'NoneType' object is not iterable")
