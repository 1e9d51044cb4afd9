"""What reuse with an accuracy target decides, case by case, with no thread and no call:
``TargetPolicy`` is shown thumbnails and told answers, and says which frames to compute,
sample and share (``hyper.reuse.policy``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from hyperframes.hyper.reuse.agree import agreement
from hyperframes.hyper.reuse.policy import Sample, TargetPolicy
from hyperframes.hyper.reuse.tuning import TUNING, Tuning


def looks(*levels: float) -> np.ndarray:
    """Thumbnails of flat frames at these levels (``change`` between two is their gap)."""
    return np.array([np.full((2, 2), v, np.float32) for v in levels])


def settle(
    policy: TargetPolicy, started: list[int], planned: list[int], truth: Callable[[int], Any]
) -> list[int]:
    """Answer what was started with ``truth`` and every wave the policy asks for after,
    until it asks for none (as the stage does at the end of the input); every frame
    computed."""
    computed = list(started)
    samples: dict[int, Sample] = {}
    frames = started
    while True:
        answers = {i: truth(i) for i in frames}
        scored = [(s, answers[i]) for i, s in samples.items()]
        refined, samples = policy.learn(answers, frames, planned, scored, until=policy.seen)
        frames, planned = [*refined, *samples], []
        if not frames:
            return computed
        policy.started(frames, refined=len(refined))
        computed += frames


def take(policy: TargetPolicy, batch: np.ndarray) -> list[int]:
    plan = policy.take(batch)
    policy.started(plan)
    return plan


def test_the_first_frame_and_one_a_span_are_planned_where_nothing_moves():
    policy = TargetPolicy(0.9, agreement("equal"))
    plans = [take(policy, looks(*[0.0] * 8)) for _ in range(5)]
    assert [i for plan in plans for i in plan] == [0, 17, 34]  # ages past span=16 plan
    assert policy.span == TUNING.span


def test_a_frame_that_moved_past_reach_is_planned_and_teaches_reach():
    policy = TargetPolicy(0.9, agreement("equal"))
    assert take(policy, looks(*[0.0] * 6, 0.8, 0.8)) == [0, 6]
    assert policy._by_motion == {6}
    settle(policy, [0, 6], [0, 6], truth=lambda i: "same")  # the cut changed nothing
    assert policy.moved > 1.0 and policy.reach > TUNING.reach  # motion alone now plans less


def test_disagreeing_ends_are_cut_until_the_change_of_answer_is_found():
    policy = TargetPolicy(0.9, agreement("equal"))
    truth = lambda i: "a" if i < 10 else "b"  # noqa: E731 - a change no thumbnail shows
    for _ in range(3):
        take(policy, looks(*[0.0] * 8))
    computed = settle(policy, [0, 17], [0, 17], truth)
    assert {9, 10} <= set(computed)  # the last "a" and the first "b" were both computed
    shares = policy.shares()
    assert all(truth(src) == truth(row) for row, src in shares.items())  # all agree
    assert len(computed) < 24  # by halving, not frame by frame


def test_a_frame_that_strays_between_agreeing_ends_is_computed_too():
    policy = TargetPolicy(0.9, agreement("equal"))
    levels = [0.0] * 24
    levels[8] = 0.3  # under reach (no plan by motion), over the excursion floor
    for k in range(0, 24, 8):
        take(policy, looks(*levels[k : k + 8]))
    refined, _ = policy.learn({0: 1, 17: 1}, [0, 17], [0, 17], [])
    assert refined == [8]


def test_a_frame_that_failed_for_good_is_left_out_and_orphans_are_computed_first():
    policy = TargetPolicy(0.9, agreement("equal"))
    take(policy, looks(*[0.0] * 8))
    policy.learn({}, [0], [0], [])  # frame 0 failed: no answer
    orphans = policy.orphans()
    assert orphans == list(range(1, 8))  # nothing to share from
    policy.computed({i: "x" for i in orphans}, orphans)
    shares = policy.shares()
    assert 0 not in shares and shares == {i: i for i in range(1, 8)}
    assert policy.summary().calls == 8


def test_span_grows_while_stretches_agree_and_shrinks_when_they_disagree():
    steady = TargetPolicy(0.9, agreement("equal"))
    for _ in range(40):
        plan = take(steady, looks(*[0.0] * 8))
        settle(steady, plan, plan, truth=lambda i: "same")
    assert steady.span > TUNING.span
    churning = TargetPolicy(0.9, agreement("equal"))
    for _ in range(10):
        plan = take(churning, looks(*[0.0] * 8))
        settle(churning, plan, plan, truth=lambda i: i)  # every frame its own answer
    assert churning.span < TUNING.span


def test_a_seed_repeats_the_sample():
    def samples(seed: int) -> list[int]:
        policy = TargetPolicy(0.9, agreement("equal"), seed=seed)
        chosen: list[int] = []
        for _ in range(20):
            plan = take(policy, looks(*[0.0] * 8))
            _, sampled = policy.learn({i: 0 for i in plan}, plan, plan, [], until=policy.seen)
            chosen += sampled
            policy.started(list(sampled))
            policy.learn({i: 0 for i in sampled}, list(sampled), [], [])
        return chosen

    assert samples(3) == samples(3)
    assert samples(3) != samples(4)


def test_the_tuning_is_checked():
    assert Tuning().held(3) == 3 * TUNING.hold
    for bad in ({"span": 0}, {"grow": 1.0}, {"margin": 1.0}, {"span": 600}, {"gather": True}):
        with pytest.raises(ValueError, match="Tuning"):
            Tuning(**bad)


def test_another_tuning_changes_the_plan():
    policy = TargetPolicy(0.9, agreement("equal"), tuning=Tuning(span=4))
    assert take(policy, looks(*[0.0] * 16)) == [0, 5, 10, 15]
