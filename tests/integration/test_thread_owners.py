"""Every thread the library starts has an owner that ends it: the codec starts none, a
store's band decoders live as long as the store."""

from __future__ import annotations

import threading

import numpy as np

import hyperframes as hf
from hyperframes.hyper import decode_frame, encode_group


def threads(prefix: str = "") -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(prefix))


def banded_frames() -> np.ndarray:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)  # large enough for bands
    return np.stack([base, base // 2 + 7, base])


def test_the_codec_starts_no_thread():
    frames = banded_frames()
    group = encode_group(frames)
    before = threads()
    assert np.array_equal(decode_frame(group.data, 1), frames[1])
    assert threads() == before


def test_a_stores_band_decoders_end_with_it(tmp_path):
    frames = banded_frames()
    path = tmp_path / "s.hfs"
    with hf.FrameStore.create(path, hf.FrameSpec(frames.shape[1:])) as writer:
        writer.write_group(frames.copy())
    with hf.FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
        assert np.array_equal(store[1], frames[1])
        assert threads("hf-store-bands")  # the bands were decoded on the store's threads
    assert threads("hf-store-bands") == []
