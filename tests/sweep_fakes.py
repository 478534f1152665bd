"""Plug-ins a sweep's job processes import (`imports` of a job): the fake backend, and one that is killed once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from builders.backend import register_backend
from tests.fake_backend import FakeBackend


@register_backend
class KilledOnceBackend(FakeBackend):
    """The first job on it is killed with SIGKILL (as the OOM killer or `scancel` would); a rerun finishes."""

    name = "fake-killed-once"

    @classmethod
    def load_inputs(cls, plan):
        marker = Path(plan.out).with_suffix(".killed")
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().load_inputs(plan)
