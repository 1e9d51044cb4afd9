import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperframes import Pipeline, Sink
from hyperframes.hyper import group_frames

pytestmark = pytest.mark.usefixtures("no_thread_leak")


class Tags(Sink):
    def __init__(self):
        self.rows = []

    def write(self, frames, index, meta):
        for k in range(len(index)):
            self.rows.append(
                (
                    int(index[k]),
                    int(meta["hyperframe"][k]),
                    int(meta["hf_pos"][k]),
                    int(meta["hf_len"][k]),
                    int(frames[k].sum()),
                )
            )


def scenes(seed, lengths, shape=(12, 10, 3)):
    rng = np.random.default_rng(seed)
    parts = []
    for n in lengths:
        base = rng.integers(0, 256, shape).astype(np.int16)
        noise = rng.integers(-2, 3, (n, *shape))
        parts.append(np.clip(base + noise, 0, 255).astype(np.uint8))
    return np.concatenate(parts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=8),
    batch_exp=st.integers(0, 5),
    min_len=st.integers(1, 4),
    max_len=st.integers(4, 30),
    seed=st.integers(0, 100),
)
def test_tags_match_group_frames_for_any_batch_size(lengths, batch_exp, min_len, max_len, seed):
    frames = scenes(seed, lengths)
    spans = group_frames(frames, threshold=1e-3, min_len=min_len, max_len=max_len)
    sink = Tags()
    report = (
        Pipeline.from_frames(frames, batch_size=1 << batch_exp)
        .map(lambda b: b, workers=2)
        .group(threshold=1e-3, min_len=min_len, max_len=max_len)
        .to(sink)
        .run()
    )
    expected = [
        (start + p, g, p, s.length)
        for g, s in enumerate(spans)
        for start, p in ((s.start, p) for p in range(s.length))
    ]
    assert [r[:4] for r in sink.rows] == expected
    assert [r[4] for r in sink.rows] == [int(f.sum()) for f in frames]  # frames unchanged
    summary = report.extra["group"]
    assert summary["hyperframes"] == len(spans)
    assert summary["max_length"] <= max_len


def test_group_options_are_validated():
    frames = np.zeros((4, 2, 2), np.uint8)
    with pytest.raises(ValueError, match="threshold"):
        Pipeline.from_frames(frames).group(threshold=2.0)
    with pytest.raises(ValueError, match="min_len"):
        Pipeline.from_frames(frames).group(min_len=9, max_len=3)


def test_user_slots_below_what_the_grouper_holds_are_refused():
    frames = np.zeros((10, 2, 2), np.uint8)
    with pytest.raises(ValueError, match="ordered stages hold"):
        Pipeline.from_frames(frames, batch_size=1).group(max_len=60).run(slots=3)


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    seed=st.integers(0, 50),
    min_len=st.integers(1, 4),
    max_len=st.integers(4, 20),
)
def test_push_distance_gives_the_same_groups_as_push(lengths, seed, min_len, max_len):
    from hyperframes.hyper import Grouper
    from hyperframes.hyper.distance import frame_mse

    frames = scenes(seed, lengths)
    a = Grouper(threshold=1e-3, min_len=min_len, max_len=max_len)
    b = Grouper(threshold=1e-3, min_len=min_len, max_len=max_len)
    spans_a = [*a.push_many(frames), *a.finish()]
    spans_b = []
    for i, f in enumerate(frames):
        spans_b += b.push_distance(frame_mse(frames[i - 1], f) if i else 0.0)
    spans_b += b.finish()
    assert spans_a == spans_b


def test_nan_in_float_frames_is_named():
    frames = np.zeros((10, 2, 2), np.float32)
    frames[6, 0, 0] = np.nan
    with pytest.raises(Exception, match="frame 6"):
        Pipeline.from_frames(frames, batch_size=4).group().run()
