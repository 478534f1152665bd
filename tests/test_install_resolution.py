"""The README's install command resolves, in a fresh venv with this machine's package sources, to the torch that
pip picks for torch alone, with a torchvision of the same build: the extras never push pip to another torch.

It runs pip's resolver (`--dry-run --report`, nothing installed): about a minute and a half, hence `integration`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def readme_install_arguments() -> list[str]:
    """The arguments after `pip install` in the README's first shell block (its install-and-run command)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block, "the README has no ```bash block"
    line = next(line for line in block.group(1).splitlines() if "pip install" in line)
    words = shlex.split(line.split("&&")[0])
    return words[words.index("install") + 1:]


def resolve(python: Path, arguments: list[str], report: Path) -> dict[str, dict]:
    """{name: metadata} of what pip would install for `arguments`, from a dry run in ROOT."""
    result = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                             "--report", str(report), *arguments], cwd=ROOT, capture_output=True, text=True,
                            timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return {item["metadata"]["name"].lower(): item["metadata"] for item in json.loads(report.read_text())["install"]}


def same_build(torch: dict, torchvision: dict) -> bool:
    """torchvision built for this torch: equal local labels and torch within torchvision's own requirement."""
    torch_version, vision_version = Version(torch["version"]), Version(torchvision["version"])
    if torch_version.local != vision_version.local:
        return False
    for line in torchvision.get("requires_dist", []):
        requirement = Requirement(line)
        if requirement.name == "torch" and not requirement.specifier.contains(torch_version.public, prereleases=True):
            return False
    return True


def test_same_build_tells_the_pairs_apart():
    cuda = {"version": "2.13.0"}
    assert same_build(cuda, {"version": "0.28.0", "requires_dist": ["torch (==2.13.0)"]})
    assert not same_build({"version": "2.13.0+cpu"}, {"version": "0.28.0", "requires_dist": ["torch (==2.13.0)"]})
    assert not same_build(cuda, {"version": "0.29.1", "requires_dist": ["torch (>=2.14.0)"]})


def test_readme_install_keeps_torch_and_its_torchvision(tmp_path):
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    alone = resolve(python, ["torch", "torchvision"], tmp_path / "alone.json")
    readme = resolve(python, readme_install_arguments(), tmp_path / "readme.json")
    assert readme["torch"]["version"] == alone["torch"]["version"], (
        f"the README's command makes pip pick torch {readme['torch']['version']}, torch alone "
        f"{alone['torch']['version']}")
    assert same_build(readme["torch"], readme["torchvision"]), (readme["torch"]["version"],
                                                                 readme["torchvision"]["version"])

