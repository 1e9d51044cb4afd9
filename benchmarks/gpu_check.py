"""GPU stage check: torch_stage (pinned memory, async copies on their own stream) vs a naive loop.

One run, under 3 minutes on a CUDA machine:

1. checks CUDA is visible (exits 2 if not, unless --allow-cpu);
2. runs a 3x3 depthwise convolution over N 720p frames (default 2,000) as
   a) a naive loop: per batch ``torch.from_numpy(b).to(device)``, compute, ``.cpu()``;
   b) the pipeline with ``torch_stage(fn)`` and 2 workers (uploads overlap compute);
   and prints fps of both and the ratio;
3. checks both outputs equal the CPU path on the first batch (max difference <= 1 level,
   as cuDNN and CPU convolutions may round differently).

Run:  python benchmarks/gpu_check.py [--frames 2000] [--batch 32] [--allow-cpu]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from hyperframes import FrameSpec, Pipeline
from hyperframes.gpu import import_torch, torch_stage

H, W = 720, 1280


def blur(x):
    torch = import_torch()
    kernel = torch.full((x.shape[1], 1, 3, 3), 1 / 9, dtype=x.dtype, device=x.device)
    return torch.nn.functional.conv2d(x, kernel, padding=1, groups=x.shape[1])


class Bank:
    """Frame ``i`` is a copy of one of four random frames."""

    def __init__(self) -> None:
        self.frames = np.random.default_rng(0).integers(0, 256, (4, H, W, 3), dtype=np.uint8)

    def __call__(self, i: int) -> np.ndarray:
        return self.frames[i % 4]


def naive(n: int, batch: int, device: str) -> tuple[float, np.ndarray]:
    torch, bank = import_torch(), Bank()
    buf = np.empty((batch, H, W, 3), np.uint8)
    first = None
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        count = min(batch, n - start)
        for j in range(count):
            buf[j] = bank(start + j)
        x = torch.from_numpy(buf[:count]).to(device).float().div(255).permute(0, 3, 1, 2)
        y = blur(x).permute(0, 2, 3, 1).mul(255).round().clamp(0, 255).to(torch.uint8)
        out = y.cpu().numpy()
        if first is None:
            first = out.copy()
    assert first is not None
    return n / (time.perf_counter() - t0), first


def pipelined(n: int, batch: int, device: str) -> tuple[float, np.ndarray]:
    kept: list[np.ndarray] = []

    def keep(ids: np.ndarray, frames: np.ndarray) -> None:
        if not kept:
            kept.append(frames.copy())

    line = (
        Pipeline.from_generator(Bank(), count=n, spec=FrameSpec((H, W, 3)), batch_size=batch)
        .map(torch_stage(blur, device=device), workers=2)
        .for_each(keep, batched=True)
    )
    t0 = time.perf_counter()
    line.run()
    return n / (time.perf_counter() - t0), kept[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--allow-cpu", action="store_true", help="run on the CPU when no CUDA")
    args = ap.parse_args()
    torch = import_torch()
    cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}, CUDA visible: {cuda}")
    if cuda:
        print(f"device: {torch.cuda.get_device_name(0)}")
    elif not args.allow_cpu:
        print("no CUDA device: nothing to check (pass --allow-cpu to run the CPU path)")
        return 2
    device = "cuda" if cuda else "cpu"
    naive(args.batch, args.batch, device)  # warm up (CUDA context, cuDNN autotune)
    naive_fps, naive_first = naive(args.frames, args.batch, device)
    piped_fps, piped_first = pipelined(args.frames, args.batch, device)
    cpu_first = torch_stage(blur, device="cpu")(np.stack([Bank()(i) for i in range(args.batch)]))
    print(f"{args.frames} x {W}x{H}, batch {args.batch}, 3x3 depthwise conv on {device}")
    print(f"naive per-batch .to(device) loop  {naive_fps:8.0f} fps")
    print(f"pipeline + torch_stage, 2 workers {piped_fps:8.0f} fps")
    print(f"ratio pipelined / naive           {piped_fps / naive_fps:8.2f}")
    worst = max(
        int(np.abs(a.astype(np.int16) - cpu_first.astype(np.int16)).max())
        for a in (naive_first, piped_first)
    )
    ok = worst <= 1
    print(f"outputs vs CPU path: max difference {worst} level(s): {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
