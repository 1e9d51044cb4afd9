"""Source of a module of functions for the tests that run ``map`` and kill it part-way:
written into a test's folder under a name of its own (a name shared between tests would
find another test's module in ``sys.modules``)."""

KILLABLE = """
import os, signal
import numpy as np

def brightness(frames):
    return [round(float(np.asarray(f, np.float64).mean()), 6) for f in frames]

seen = 0

def dies(frames):
    global seen
    seen += len(frames)
    if os.environ.get("DIE_AT") and seen >= int(os.environ["DIE_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return brightness(frames)
"""
