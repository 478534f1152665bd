"""The engine a session ran on, as its backend wrote it into the study (`Study.engine`, `Study.engine_options`).

Renderers ask here and never test a backend's name. Sessions written before backends named themselves
carry neither field: for those alone the name is read from the backend and the recorded versions.
"""

from __future__ import annotations

from sessions.documents.model import Environment, Study

_EARLIER = {"tensorrt": "TensorRT", "torch": "PyTorch"}  # backend -> label, and its version's key in versions


def engine_label(study: Study, environment: Environment) -> str:
    """`TensorRT 10.3.0`, `PyTorch 2.11.0`, `trtexec files`: what ran the study, with its version."""
    if study.engine is not None:
        return study.engine
    if study.backend in _EARLIER:
        return f"{_EARLIER[study.backend]} {environment.versions.get(study.backend) or '?'}"
    return "trtexec files" if study.source == "trtexec" else study.backend


def ran_tensorrt(study: Study) -> bool:
    """Whether TensorRT built the study's engines (what an FP8 study says it did not measure otherwise)."""
    return study.backend == "tensorrt"


def engine_options(study: Study) -> dict[str, str]:
    """The plan options only the study's engine reads (TensorRT: `opt_level`), by field name."""
    if study.engine is None and study.backend == "tensorrt" and study.plan is not None:
        return {"opt_level": str(study.plan.opt_level)}
    return study.engine_options
