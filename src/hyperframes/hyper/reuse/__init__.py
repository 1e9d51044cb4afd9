"""Reuse: a stage's function computed on some frames, its answers shared with the rest.

``by_hyperframe``: once per hyperframe, verified (``ReuseByHyperframe``). ``target``: as
few calls as keep an accuracy target on the function's own answers (``ReuseTarget``):
``policy`` decides which frames to compute, sample and share from what was seen, with
the constants of ``tuning``; ``target`` runs those calls. ``agree`` scores two answers.
"""

from .agree import Agreement, agreement
from .by_hyperframe import ReuseStrategy
from .target import TargetReuse

__all__ = ["Agreement", "ReuseStrategy", "TargetReuse", "agreement"]
