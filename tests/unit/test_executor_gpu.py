"""GPU stages through torch_stage, on the CPU path (the same code runs on CUDA when present)."""

from __future__ import annotations

import numpy as np
import pytest

from hyperframes import Pipeline
from hyperframes.gpu import torch_stage

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("no_thread_leak")]


def invert(x):
    return 1.0 - x


def box_blur(x):
    kernel = torch.full((x.shape[1], 1, 3, 3), 1 / 9, dtype=x.dtype)
    return torch.nn.functional.conv2d(x, kernel, padding=1, groups=x.shape[1])


def luma(x):
    return x.float().mean(dim=3, keepdim=True)


def frames_of(n=20):
    return np.random.default_rng(1).integers(0, 256, (n, 8, 10, 3), dtype=np.uint8)


def test_invert_in_place_equals_numpy():
    frames = frames_of()
    out = Pipeline.from_frames(frames, batch_size=8).map(torch_stage(invert), workers=2).collect()
    np.testing.assert_array_equal(out, 255 - frames)


def test_nchw_convolution_matches_a_plain_torch_call():
    frames = frames_of()
    out = Pipeline.from_frames(frames, batch_size=8).map(torch_stage(box_blur)).collect()
    x = torch.from_numpy(frames).float().div(255).permute(0, 3, 1, 2)
    expected = box_blur(x).permute(0, 2, 3, 1).mul(255).round().clamp(0, 255).to(torch.uint8)
    np.testing.assert_array_equal(out, expected.numpy())


def test_nhwc_uint8_input_and_a_new_shape():
    frames = frames_of()
    stage = torch_stage(luma, layout="NHWC", input="uint8", device="cpu")
    out = Pipeline.from_frames(frames, batch_size=8).map(stage).collect()
    np.testing.assert_array_equal(
        out, np.round(frames.mean(axis=3, keepdims=True)).astype(np.uint8)
    )


def test_bad_options():
    with pytest.raises(ValueError, match="layout must be"):
        torch_stage(invert, layout="CHW")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a callable"):
        torch_stage(3)  # type: ignore[arg-type]


def test_an_answer_per_frame_is_refused_as_frames_and_kept_as_answers():
    frames = frames_of()

    def logits(x):  # (N, 4) a batch: a classifier's answer, not frames
        return x.mean(dim=(2, 3)).repeat(1, 2)[:, :4]

    with pytest.raises(ValueError, match=r"returned a tensor of shape \(8, 4\).*returns='answers'"):
        Pipeline.from_frames(frames, batch_size=8).map(torch_stage(logits, device="cpu")).collect()
    got = {}
    stage = torch_stage(logits, device="cpu", returns="answers")
    Pipeline.from_frames(frames, batch_size=8).map(stage, into="logits").for_each(
        lambda i, f, meta: got.update({i: meta["logits"]}), meta=True
    ).run()
    x = torch.from_numpy(frames).float().div(255).permute(0, 3, 1, 2)
    np.testing.assert_allclose(
        np.stack([got[i] for i in sorted(got)]), logits(x).numpy(), rtol=1e-6
    )
    assert np.stack(list(got.values())).dtype == np.float32  # not made into uint8 "frames"
