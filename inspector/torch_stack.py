"""The torch / torchvision pair a model-building command imports, checked before any work.

pip can install a CPU torch beside a CUDA torchvision (both satisfy `torchvision`'s `torch==X` pin, the local
label `+cpu` aside); the first `import timm` then dies in a traceback deep inside torchvision. `check` turns that,
and any other failure to import the pair, into one line that names both builds and the fix.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING

from sessions.documents.errors import MissingEnvironment

if TYPE_CHECKING:
    from packaging.version import Version

FIX = "reinstall them as one pair: python -m pip install --force-reinstall torch torchvision"


def _build(version: Version) -> str:
    """'cpu build', 'cu126 build' (the local label) or 'default build' (PyPI's wheels carry none)."""
    return f"{version.local} build" if version.local else "default build"


def _installed(name: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(metadata.version(name))
    except metadata.PackageNotFoundError:
        raise MissingEnvironment(f"{name} is not installed: python -m pip install -e .") from None
    except InvalidVersion as exc:
        raise MissingEnvironment(f"{name} has an unreadable version ({exc}); {FIX}") from None


def _declared_torch(torchvision: Version) -> str | None:
    """torchvision's own requirement on torch (`==2.13.0`, `>=2.14.0`), or None where it declares none."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in metadata.requires("torchvision") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name == "torch" and requirement.marker is None:
            return str(requirement.specifier) or None
    return None


def check() -> None:
    """Raise `MissingEnvironment` (one line, with the fix) unless torch and torchvision are one build that imports.

    One build: the same local label (`+cpu` with `+cpu`, none with none), torch inside torchvision's declared
    requirement, and `import torchvision` succeeding; nothing is imported when the labels already disagree.
    """
    from packaging.requirements import Requirement

    torch, torchvision = _installed("torch"), _installed("torchvision")
    pair = f"torch {torch} ({_build(torch)}) with torchvision {torchvision} ({_build(torchvision)})"
    if torch.local != torchvision.local:
        raise MissingEnvironment(f"torch and torchvision do not match: {pair}; {FIX}")
    declared = _declared_torch(torchvision)
    if declared is not None and not Requirement(f"torch{declared}").specifier.contains(torch.public, prereleases=True):
        raise MissingEnvironment(f"torch and torchvision do not match: {pair}, which needs torch{declared}; {FIX}")
    try:
        importlib.import_module("torchvision")
    except Exception as exc:  # noqa: BLE001 - a torchvision built for another torch fails in many ways
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MissingEnvironment(f"torch and torchvision do not match: {pair}: importing torchvision fails "
                                 f"({first}); {FIX}") from None
