"""The TensorRT backend: ONNX export with Q/DQ, engine building and the device side of a TensorRT run."""
