"""Readable kernel names: C++ symbols (`_Z...`) demangled in one c++filt call per trace."""

from __future__ import annotations

import shutil
import subprocess


def demangle(names: list[str]) -> list[str]:
    """Demangled names in the same order; names are kept as they are where c++filt is missing."""
    mangled = [n for n in names if n.startswith("_Z")]
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return list(names)
    try:
        result = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return list(names)
    readable = dict(zip(mangled, result.stdout.splitlines(), strict=False))
    return [readable.get(n, n) for n in names]
