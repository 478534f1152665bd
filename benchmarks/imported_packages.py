"""The folders of the installed packages a main job imports, outside the project and the folder given as the
first argument (packages installed there by pip are compiled and in the page cache already), one per line, with the
NVIDIA library folders PyTorch loads: what benchmarks/h200_setup.sh compiles and reads as a fresh install leaves them.

    python benchmarks/imported_packages.py /tmp/site
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

MAIN_JOB_MODULES = ("inspector.study", "inspector.commands.run", "builders.engine.cudnn_backend",
                    "builders.pytorch.torch_backend", "builders.fp8.quantize", "builders.engine.compiler",
                    "profilers.kernel_trace", "profilers.timing",
                    "timm", "modelopt.torch.quantization", "nvidia")


def main(skipped: list[str]) -> None:
    for name in MAIN_JOB_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001  (a package this machine lacks is not read)
            print(f"not imported: {name}: {exc}", file=sys.stderr)
    sites = [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    project = Path(__file__).resolve().parent.parent
    skip = [Path(s).resolve() for s in skipped] + [project]
    found: set[Path] = set()
    for module in list(sys.modules.values()):
        try:  # a package's folders (a namespace package such as nvidia has only these); some modules fake __path__
            folders = list(getattr(module, "__path__", None) or [])
        except TypeError:
            folders = []
        for location in [getattr(module, "__file__", None), *folders]:
            if not isinstance(location, str):
                continue
            path = Path(location).resolve()
            if any(path.is_relative_to(s) for s in skip):
                continue
            for site in sites:
                if path.is_relative_to(site.resolve()) and path != site.resolve():
                    found.add(site.resolve() / path.relative_to(site.resolve()).parts[0])
    for folder in sorted(found):
        if folder.is_dir():
            print(folder)


if __name__ == "__main__":
    main(sys.argv[1:])
