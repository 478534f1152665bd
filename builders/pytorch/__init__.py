"""PyTorch's own backends (eager and torch.compile), CUDA-graph capture and the simulated variant modules."""
