"""The cuDNN frontend, bound to the libcudnn PyTorch already loaded (`import_cudnn`): what the engine's and the FP8
probe's cuDNN graphs are built with."""

from __future__ import annotations

import os

import torch

from sessions.documents.errors import MissingEnvironment

CUDNN_PACKAGE = "nvidia-cudnn-frontend"


def import_cudnn():
    """The cuDNN frontend, bound to the libcudnn PyTorch already loaded."""
    torch.backends.cudnn.version()  # loads PyTorch's libcudnn into the process
    library_dir = _loaded_library_dir("libcudnn.so")
    if library_dir and library_dir not in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        # the frontend looks for libcudnn in LD_LIBRARY_PATH first, then in its own wheel's layout
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (library_dir, os.environ.get("LD_LIBRARY_PATH")) if p)
    try:
        import cudnn
    except Exception as exc:  # noqa: BLE001  (ImportError, or OSError from its library loader)
        raise MissingEnvironment(
            f"the cuDNN frontend is not usable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            f"pip install {CUDNN_PACKAGE} (its nvidia-cutlass-dsl and apache-tvm-ffi dependencies are not needed)"
        ) from None
    return cudnn


def _loaded_library_dir(prefix: str) -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path).startswith(prefix):
                    return os.path.dirname(path)
    except OSError:
        return None
    return None
