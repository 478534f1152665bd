"""The FP8 format the engine and the probe compute in: e4m3 (PyTorch's float8_e4m3fn, as TensorRT's FP8 and cuDNN's
FP8 tensors), and its largest finite value, to which quantizing saturates."""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0
