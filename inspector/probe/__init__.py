"""The FP8 probe's wing: every convolution and linear of a model timed alone in fp16 and in real FP8 kernels.

Orchestration: it may import `builders` (layer specs, FP8 kernels, the study inputs) and `profilers` (timing
and tracing); `sessions.reports.probe_summary` reads the sessions it writes.
"""
