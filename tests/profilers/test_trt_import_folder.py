"""`trt-inspect import DIR`: the engines of a folder, each file paired with its engine by name and trtexec's options.

The expected files come from `tests/trt_sets.py` (plain json over the raw files of ../shared/fixtures) and, for
folders of trtexec logs, from `_raw_engine` below (a regular expression over each log's command line).
"""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest

from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.text_layers import is_trtexec_log
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import run_cli
from tests.trt_sets import SHARED, engines, set_folders

SINGLE = [folder for folder in set_folders() if len(engines(folder)) == 1]
MANY = [folder for folder in set_folders() if len(engines(folder)) > 1]
LOGS = [folder for folder in set_folders() if not engines(folder)]  # folders of trtexec logs alone
GOOGLENET = SHARED / "trt" / "trt7.1-googlenet-xavier-dla-gpu-profiles"
ENGINE_OPTION = re.compile(r"^&&&& RUNNING .*?--(?:saveEngine|loadEngine)=(\S+)", re.MULTILINE)


def _taken(note: str) -> list[str]:
    """The file names a folder note says it took."""
    took = note.split(": took ", 1)[1].split("; left ", 1)[0]
    return re.findall(r"(?:^|\), )([^ ()]+) \(", took)


@pytest.mark.parametrize("folder", SINGLE, ids=[f"{f.parent.name}/{f.name}" for f in SINGLE])
def test_a_folder_of_one_engine_gives_its_layer_profile_and_times_files(folder):
    engine = engines(folder)[0]
    (found,) = files_of_folder(folder).engines
    assert [found.files.one(role) for role in ("layers", "profile", "times")] == [engine.layers, engine.profile,
                                                                                engine.times]
    assert set(engine.logs) <= set(found.files.every("metadata"))
    left = {entry.split(" (")[0] for entry in files_of_folder(folder).left}
    assert left >= {"SOURCE.md", "SHA256SUMS"} & {p.name for p in folder.iterdir()}


def _raw_engine(log: Path) -> str | None:
    match = ENGINE_OPTION.search(log.read_text(errors="replace")[:20000])
    return Path(match.group(1)).name if match else None


@pytest.mark.parametrize("folder", LOGS, ids=[f.name for f in LOGS])
def test_a_folder_of_one_engines_logs_is_read_whole(folder):
    """Every log of a folder whose logs save or load one engine file is read: none is left."""
    logs = [p for p in sorted(folder.iterdir()) if p.name not in ("SOURCE.md", "SHA256SUMS")]
    named = {_raw_engine(log) for log in logs} - {None}
    assert len(named) <= 1, named
    found = files_of_folder(folder)
    (engine,) = found.engines
    taken = {p for role in ("layers", "profile", "times", "metadata") for p in engine.files.every(role)}
    assert {p.name for p in taken} == {p.name for p in logs}, found.left
    assert engine.name == (re.sub(r"\.(plan|trt|engine)$", "", named.pop()) if named else None)


def test_the_googlenet_folder_is_one_variant_per_engine_named_by_what_their_names_do_not_share():
    if not GOOGLENET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    profiles = sorted(p.name for p in GOOGLENET.glob("*.profile"))
    found = files_of_folder(GOOGLENET)
    expected = [name.removeprefix("googlenet_").removesuffix(".profile") for name in profiles]
    assert [e.name for e in found.engines] == expected and len(expected) == 32 and found.model == "googlenet"
    assert [e.files.one("profile").name for e in found.engines] == profiles
    kept = files_of_folder(GOOGLENET, "gpu_mark_*")
    assert [e.name for e in kept.engines] == [n for n in expected if n.startswith("gpu_mark_")]
    with pytest.raises(InputError, match="matches none"):
        files_of_folder(GOOGLENET, "tpu_*")


def test_the_googlenet_session_compares_its_placements_and_diff_flags_the_dla_slowdown(tmp_path):
    if not GOOGLENET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    out = tmp_path / "g.json"
    result = run_cli("import", str(GOOGLENET), "--out", str(out))
    assert result.returncode == 0, result.stderr
    session = storage.load(out)
    assert len(session.variants) == 32 and session.study.model == "googlenet"
    diff = run_cli("diff", str(out), str(out), "--pair", "gpu_transition_at_-1=dla_mark_at_-1", "--format", "json")
    assert diff.returncode == 1, diff.stderr  # diff's exit status for a regression
    changes = json.loads(diff.stdout)["changes"]
    summed = [c for c in changes if c["what"] == "summed layer time"]
    raw = {name: sum(r["averageMs"] for r in json.loads((GOOGLENET / f"googlenet_{name}.profile").read_text())
                     if "name" in r) for name in ("gpu_transition_at_-1", "dla_mark_at_-1")}
    assert len(summed) == 1 and summed[0]["regression"]
    assert summed[0]["a"] == pytest.approx(raw["gpu_transition_at_-1"]) and summed[0]["b"] == pytest.approx(
        raw["dla_mark_at_-1"])
    assert raw["dla_mark_at_-1"] > 1.05 * raw["gpu_transition_at_-1"]


def test_the_command_imports_a_folder_and_says_what_it_took_and_left(tmp_path):
    folder = next((f for f in SINGLE if f.name == "trt8.4-resnet-a100-fp32"), None)
    if folder is None:
        pytest.skip("shared fixtures are not beside the checkout")
    out = tmp_path / "s.json"
    result = run_cli("import", str(folder), "--out", str(out))
    assert result.returncode == 0, result.stderr
    note = storage.load(out).variants[0].notes[0]
    assert _taken(note) == sorted(p.name for p in folder.iterdir() if p.name not in ("SOURCE.md", "SHA256SUMS"))
    assert "resnet.onnx.engine.graph.json (layers)" in note and "left SHA256SUMS (" in note
    refused = run_cli("import", str(folder), "--layers", str(folder / "resnet.onnx.engine.graph.json"),
                      "--out", str(out))
    assert refused.returncode == 2 and "not both" in refused.stderr


# Hand-written folders in the real layouts (the 10.16 cookbook set: a verbose build, a run with its summary, a
# --dumpProfile run, each a log of its own named result-NN.log)
def _run_log(command: str, body: str) -> str:
    stamp = "[07/07/2026-02:11:26] [I] "
    return (f"&&&& RUNNING TensorRT.trtexec [TensorRT v101601] [b11] # trtexec {command}\n"
            f"{stamp}=== Model Options ===\n"
            f"{body}&&&& PASSED TensorRT.trtexec [TensorRT v101601] [b11] # trtexec {command}\n")


BUILD = ("[07/07/2026-02:11:14] [V] [TRT] Engine Layer Information:\n"
         "[07/07/2026-02:11:14] [V] [TRT] Layer(CaskConvolution): conv1 + relu1, Tactic: 0x00000000000003e8, "
         "x (Float[4,1,28,28]) -> relu (Float[4,32,28,28])\n"
         "[07/07/2026-02:11:14] [V] [TRT] Layer(CaskPooling): pool1, Tactic: 0x5faf4fc7bc0b1bc5, "
         "relu (Float[4,32,28,28]) -> pool (Float[4,32,14,14])\n")
SUMMARY = ("[07/07/2026-02:11:29] [I] Timing trace has 74692 queries over 3.00005 s\n"
           "[07/07/2026-02:11:29] [I] === Performance summary ===\n"
           "[07/07/2026-02:11:29] [I] GPU Compute Time: min = 0.0383301 ms, max = 0.0651855 ms, mean = 0.0387646 ms, "
           "median = 0.0388184 ms, percentile(90%) = 0.0388489 ms, percentile(95%) = 0.0389404 ms, "
           "percentile(99%) = 0.0390625 ms\n")
TABLE = ("[07/07/2026-02:11:43] [I] === Profile (100 iterations ) ===\n"
         "[07/07/2026-02:11:43] [I]    Time(ms)     Avg.(ms)   Median(ms)   Time(%)   Layer\n"
         "[07/07/2026-02:11:43] [I]        3.00       0.0300       0.0300      75.0   conv1 + relu1\n"
         "[07/07/2026-02:11:43] [I]        1.00       0.0100       0.0100      25.0   pool1\n"
         "[07/07/2026-02:11:43] [I]        4.00       0.0400       0.0400     100.0   Total\n")


def _cookbook(folder: Path, engine: str = "model-trained.trt") -> None:
    (folder / "result-02.log").write_text(_run_log(f"--onnx=/w/model-trained.onnx --saveEngine={engine} --verbose",
                                                   BUILD))
    (folder / "result-03.log").write_text(_run_log(f"--loadEngine={engine} --shapes=x:4x1x28x28", SUMMARY))
    (folder / "result-05.log").write_text(_run_log(f"--loadEngine=./{engine} --dumpProfile", TABLE))


def test_a_build_a_run_and_a_profile_log_of_one_engine_are_one_variant(tmp_path: Path) -> None:
    _cookbook(tmp_path)
    out = tmp_path / "s.json"
    result = run_cli("import", str(tmp_path), "--out", str(out))
    assert result.returncode == 0, result.stderr
    variant = storage.load(out).variants[0]
    assert variant.name == "model-trained" and storage.load(out).study.model == "model-trained"
    assert _taken(variant.notes[0]) == ["result-02.log", "result-03.log", "result-05.log"]
    assert "result-03.log (run facts and performance summary)" in variant.notes[0]
    rows = dict(re.findall(r"\]\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(?!Total)(\S.*)", TABLE))
    assert {layer.name: layer.time_ms for layer in variant.layers} == {name: float(ms) for ms, name in rows.items()}
    median = float(re.search(r"median = ([\d.]+) ms", SUMMARY)[1])
    assert variant.latency is not None and variant.latency.median_ms == median
    assert storage.load(out).study.batch == 4


def test_a_names_only_layer_file_beside_a_log_with_a_table_gets_the_tables_times(tmp_path: Path) -> None:
    """The JSON file names the layers; the log's --dumpProfile table times them (no JSON profile is there)."""
    (tmp_path / "layers.json").write_text(json.dumps({"Layers": ["conv1 + relu1", "pool1"],
                                                      "Bindings": ["x", "pool"]}))
    (tmp_path / "run.log").write_text(_run_log("--loadEngine=e.plan --dumpProfile --exportLayerInfo=layers.json",
                                               TABLE))
    (engine,) = files_of_folder(tmp_path).engines
    assert engine.files.one("layers") == tmp_path / "layers.json"
    assert engine.files.one("profile") == tmp_path / "run.log"
    from profilers.trt_import.importer import import_variant

    layers = import_variant(engine.files).variant.layers
    assert [layer.time_ms for layer in layers] == [0.03, 0.01]


def test_two_logs_that_give_one_engines_layers_equally_are_refused_naming_them(tmp_path: Path) -> None:
    _cookbook(tmp_path)
    (tmp_path / "result-12.log").write_text(_run_log("--onnx=m.onnx --saveEngine=model-trained.trt --verbose", BUILD))
    with pytest.raises(InputError, match=r"2 files of engine model-trained.trt give its layers equally: "
                                         r"result-02.log, result-12.log"):
        files_of_folder(tmp_path)


def test_logs_of_two_engine_files_are_two_variants_named_by_what_differs(tmp_path: Path) -> None:
    _cookbook(tmp_path, "net-fp16.plan")
    (tmp_path / "other-02.log").write_text(_run_log("--onnx=m.onnx --saveEngine=net-int8.plan --verbose", BUILD))
    found = files_of_folder(tmp_path)
    assert [e.name for e in found.engines] == ["int8", "fp16"] and found.model == "net"  # in the files' order
    assert [e.files.one("layers").name for e in found.engines] == ["other-02.log", "result-02.log"]
    assert [e.name for e in files_of_folder(tmp_path, "*int8*").engines] == ["int8"]
    assert [e.name for e in files_of_folder(tmp_path, "result-05.log").engines] == ["fp16"]  # by a file's name


ALEXNET = SHARED / "trt" / "trt10-alexnet-fp16-trtexec-rtx3060"


@pytest.mark.parametrize("encode", [
    lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
    lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    lambda text: text.encode("utf-16-be"),  # no byte-order mark: the zero bytes show it
    lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
], ids=["utf-8 bom", "utf-16 bom", "utf-16-be", "utf-32 bom"])
def test_a_layer_file_in_another_unicode_encoding_is_read_as_the_utf8_one(tmp_path, encode):
    if not ALEXNET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    for path in ALEXNET.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    layers = tmp_path / "alexnet_fp16.graph.json"
    layers.write_bytes(encode(layers.read_text(encoding="utf-8")))
    expected = [layer["Name"] for layer in json.loads((ALEXNET / layers.name).read_text())["Layers"]]
    (engine,) = files_of_folder(tmp_path).engines
    assert engine.files.one("layers") == layers
    out = tmp_path / "s.json"
    assert run_cli("import", "--layers", str(layers), "--out", str(out)).returncode == 0
    variant = storage.load(out).variants[0]
    assert [layer.name for layer in variant.layers] == expected and variant.layers[1].tactic


MNIST_LOG = SHARED / "trt" / "trt8.0.3-mnist-cnn-fp32-gtx1070-build-profile" / "result-FP32.txt"


@pytest.mark.parametrize("encode", [
    lambda text: codecs.BOM_UTF16_LE + text.replace("\n", "\r\n").encode("utf-16-le"),  # PowerShell's `>`
    lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
], ids=["utf-16 bom crlf", "utf-16 bom", "utf-8 bom"])
def test_a_trtexec_log_in_another_unicode_encoding_is_read_as_the_utf8_one(tmp_path, encode):
    if not MNIST_LOG.is_file():
        pytest.skip("shared fixtures are not beside the checkout")
    sessions = []
    for name, body in (("utf-8", MNIST_LOG.read_bytes()), ("other", encode(MNIST_LOG.read_text(encoding="utf-8")))):
        (tmp_path / name).mkdir()
        (tmp_path / name / MNIST_LOG.name).write_bytes(body)
        out = tmp_path / f"{name}.json"
        assert run_cli("import", str(tmp_path / name), "--out", str(out)).returncode == 0
        sessions.append(storage.load(out).variants[0])
    assert is_trtexec_log(tmp_path / "other" / MNIST_LOG.name)  # its options and device are run facts too
    utf8, other = sessions
    assert utf8.layers and [(layer.name, layer.time_ms) for layer in other.layers] == [
        (layer.name, layer.time_ms) for layer in utf8.layers]
    assert utf8.latency is not None and other.latency == utf8.latency and other.name == utf8.name


def test_a_folder_or_an_empty_file_among_an_engines_files_is_left_saying_why(tmp_path):
    if not ALEXNET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    for path in ALEXNET.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "other.profile.json").mkdir()
    (tmp_path / "empty.graph.json").write_bytes(b"")
    left = dict(entry.split(" (", 1) for entry in files_of_folder(tmp_path).left)
    assert "folder" in left["other.profile.json"] and left["empty.graph.json"] == "empty)"


def test_a_log_cut_before_trtexecs_closing_line_is_said_to_be_cut_and_a_whole_one_is_not(tmp_path):
    source = SHARED / "trt" / "trt8.0.3-mnist-cnn-fp32-gtx1070-build-profile" / "result-FP32.txt"
    if not source.is_file():
        pytest.skip("shared fixtures are not beside the checkout")
    text = source.read_text()
    assert re.search(r"^&&&& PASSED ", text, re.MULTILINE)  # the premise: the whole log closes its run
    for name, body, cut in (("whole", text, False), ("cut", text[: len(text) // 2], True)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / source.name).write_text(body)
        out = tmp_path / f"{name}.json"
        assert run_cli("import", str(folder), "--out", str(out)).returncode == 0
        notes = " ".join(storage.load(out).variants[0].notes)
        assert ("lacks its closing '&&&& PASSED'" in notes) == cut


def test_a_log_of_another_engine_beside_a_layer_file_is_left_and_its_run_facts_not_taken(tmp_path):
    """The RTX 6000 Ada engine's layer listing beside the H100 engine's run log (both public sets, same network,
    another TensorRT and GPU): the log lists its own layers, and not these, so its GPU and version are not this
    engine's. Each set's own pair is one engine and keeps its facts."""
    ada, h100 = SHARED / "trt" / "trt10.14-mnist-cnn-fp32-rtx6000ada", SHARED / "trt" / "trt10.16-mnist-cnn-fp32-h100"
    if not (ada.is_dir() and h100.is_dir()):
        pytest.skip("shared fixtures are not beside the checkout")
    gpu_of = {s: re.search(r"Selected Device: (.+)", (s / "result-04.log").read_text()).group(1).strip()
              for s in (ada, h100)}
    assert gpu_of[ada] != gpu_of[h100]  # the premise, read from the logs by hand
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "model-trained-exportLayerInfo.log").write_bytes((ada / "model-trained-exportLayerInfo.log").read_bytes())
    (mixed / "result-04.log").write_bytes((h100 / "result-04.log").read_bytes())
    cut = tmp_path / "cut"  # the H100 set with its run log cut before its layer listing's last line: still its own
    cut.mkdir()
    (cut / "model-trained-exportLayerInfo.log").write_bytes((h100 / "model-trained-exportLayerInfo.log").read_bytes())
    log = (h100 / "result-04.log").read_text()
    (cut / "result-04.log").write_text(log[: log.rfind("\n", 0, log.rfind("Name: "))])
    for folder, gpu, foreign in ((mixed, None, True), (ada, gpu_of[ada], False), (h100, gpu_of[h100], False),
                                 (cut, gpu_of[h100], False)):
        out = tmp_path / f"{folder.name}.json"
        assert run_cli("import", str(folder), "--out", str(out)).returncode == 0
        session = storage.load(out)
        assert (session.environment.gpu.name if session.environment.gpu else None) == gpu
        notes = " ".join(session.variants[0].notes)
        assert ("result-04.log left: another engine's log" in notes) == foreign


@pytest.mark.parametrize("empty", ["[]", "{}", '[{"count": 10}]', ' [ ] \n'])
def test_a_json_file_with_no_records_is_left_as_empty_not_as_an_unknown_kind(tmp_path: Path, empty: str) -> None:
    folder = next((f for f in SINGLE if f.name == "trt8.4-resnet-a100-fp32"), None)
    if folder is None:
        pytest.skip("shared fixtures are not beside the checkout")
    copy = tmp_path / "files"
    copy.mkdir()
    (copy / "resnet.onnx.engine.graph.json").write_bytes((folder / "resnet.onnx.engine.graph.json").read_bytes())
    (copy / "resnet.onnx.engine.profile.json").write_text(empty)
    out = tmp_path / "s.json"
    assert run_cli("import", str(copy), "--out", str(out)).returncode == 0
    note = storage.load(out).variants[0].notes[0]
    assert "left resnet.onnx.engine.profile.json (a JSON document with no records in it)" in note
