"""FP8 as data: the format, its scale rule and the quantize kernels, shared by every backend and the probe."""
