"""Measurements: timing, per-layer profiles, kernel tracing and attribution, quality, environment."""
