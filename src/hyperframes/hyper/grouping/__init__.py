"""Grouping: adjacent, similar frames cut into hyperframes as they stream past
(:class:`Grouper`), and the stage that tags each frame with its hyperframe (``tagging``)."""

from .grouper import Grouper, GroupingOptions, Rule, Span, group_frames

__all__ = ["Grouper", "GroupingOptions", "Rule", "Span", "group_frames"]
