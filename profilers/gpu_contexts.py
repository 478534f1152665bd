"""The GPU state a study's rows are timed in: another process's CUDA context made and ended after every graph is made.

On the H200 a CUDA graph's replays ran slower (the GPU's own time) until another process made or ended a CUDA
context on the same GPU after the graph was made; from then on that graph ran at the faster time. A graph made while
another context lived stayed slow until that context ended; a graph made after it ended stayed slow until another
context was made. A cold build's plan-compiler workers make and end contexts after the first variants' graphs exist
and a warm build makes none, so a first run's rows and a later run's differed, every variant alike; another context
made before the graphs, or held through the whole study, left a warm run's rows slow. By how much, and the evidence:
docs/evidence.md ("Why the timing defaults are what they are").

So once every variant's graph is made and before the timing rounds, a GPU study has a short-lived process make a
context on the study's GPU, run one memset on it and end (`settle_gpu`): every row is then timed in the state
any later context event leaves a graph in, whatever the builds did. The environment records what happened
(`Environment.gpu_state`, in the words of `sessions.documents.vocab`); a state not settled is a caveat under the
variant table.
"""

from __future__ import annotations

import subprocess
import sys

from sessions.documents.vocab import GPU_STATE_NOT_SETTLED, GPU_STATE_SETTLED

TIMEOUT_S = 60.0  # a driver's first context can take seconds; a helper past this is ended and reported

# The helper: the CUDA driver API through ctypes (no torch import: it is done in well under a second), one context
# on the device the study uses (the same CUDA_VISIBLE_DEVICES), one memset run on it, then the process ends.
_HELPER = """
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")
def check(name, *args):
    code = getattr(cuda, name)(*args)
    if code:
        sys.exit(f"{name} returned CUDA error {code}")
device, context, memory = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
check("cuInit", 0)
check("cuDeviceGet", ctypes.byref(device), int(sys.argv[1]))
check("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
check("cuCtxSetCurrent", context)
check("cuMemAlloc_v2", ctypes.byref(memory), ctypes.c_size_t(1 << 20))
check("cuMemsetD8_v2", memory, ctypes.c_ubyte(0), ctypes.c_size_t(1 << 20))
check("cuCtxSynchronize")
"""


def settle_gpu(device_index: int) -> str:
    """Have a helper process make a CUDA context on CUDA device `device_index`, run one memset and end;
    `GPU_STATE_SETTLED`, or why it did not (`GPU_STATE_NOT_SETTLED` and the reason; the study goes on either way).
    The words are the same in every study where it did. Once a helper has failed in this process, the same words
    come back at once: the driver that refused it will refuse the next (the probe settles once a shape)."""
    global _failed
    if _failed is not None:
        return _failed
    said = _helper(device_index)
    if said != GPU_STATE_SETTLED:
        _failed = said
    return said


_failed: str | None = None  # the words of the first helper that failed in this process


def _helper(device_index: int) -> str:
    try:
        process = subprocess.Popen([sys.executable, "-c", _HELPER, str(device_index)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"{GPU_STATE_NOT_SETTLED}the helper process did not start ({type(exc).__name__})"
    try:
        _, error = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        try:  # a child stuck in the driver may not even die: it is left, and the study goes on
            process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return f"{GPU_STATE_NOT_SETTLED}the helper process did not end within {TIMEOUT_S:g} s"
    if process.returncode != 0:
        lines = (error or "").strip().splitlines()
        reason = lines[-1] if lines else f"exit {process.returncode}"
        return f"{GPU_STATE_NOT_SETTLED}the helper process failed ({reason})"
    return GPU_STATE_SETTLED
