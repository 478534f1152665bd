"""Does cuDNN's kernel cache cut the engine's cold build?
`trt-inspect senet154 --variants fp16,cudnn-fp16,cudnn-fp8-all`
from a cold timing cache, as the engine builds today (`plain`) or with every cuDNN graph made with dynamic shapes
and one shared kernel cache (`cache`), so that graphs of one topology and other shapes reuse a compiled kernel.
Prints the wall time; the study prints each variant's build seconds and median. One mode per process:

    python benchmarks/kernel_cache_check.py plain|cache
"""

from __future__ import annotations

import os
import sys
import tempfile
import time


def main(mode: str) -> int:
    os.environ["TRT_INSPECT_HOME"] = tempfile.mkdtemp()  # a cold timing cache
    if mode == "cache":
        from builders.engine.cudnn_library import import_cudnn

        cudnn = import_cudnn()
        original, shared = cudnn.pygraph, cudnn.create_kernel_cache()

        def pygraph(*args, **kwargs):
            return original(*args, kernel_cache=shared, is_dynamic_shape_enabled=True, **kwargs)

        cudnn.pygraph = pygraph
    from inspector.cli import main as trt_inspect

    start = time.perf_counter()
    code = trt_inspect(["senet154", "--variants", "fp16,cudnn-fp16,cudnn-fp8-all", "--out",
                        os.path.join(tempfile.mkdtemp(), "s.json")])
    print(f"{mode}: exit {code}, {time.perf_counter() - start:.1f} s wall")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
