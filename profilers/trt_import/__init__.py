"""The TensorRT file importers: layer information, profiles, times, trtexec metadata and logs, into sessions."""
