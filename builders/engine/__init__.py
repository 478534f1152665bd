"""The real FP8 engine: a model lowered to cuDNN / cuBLASLt plans, timed like TensorRT's builder, run in CUDA graphs."""
