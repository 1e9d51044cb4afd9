"""Frames into a torch loop of the user's (issue 52): our iterator and our dataset under a
``DataLoader`` against torchcodec and SPDL doing the same, whole scripts (start-up
included), side by side, interleaved, in one run.

Each approach reads every frame of one clip as float32 NCHW tensors in 0..1, batches of
16, into a trivial model (the batch's mean), in the same loop shape: ``for x in batches``, so
each keeps its last batch while the next one is made, as a training loop does (the first
version of this script freed SPDL's batch before the next was made, and no one else's):

* ``hf iter_batches``: ``Pipeline.from_source(VideoSource(clip), batch_size=16)
  .iter_batches(tensors=hf.Tensors())``;
* ``hf DataLoader``: ``DataLoader(hf.VideoDataset(clip, batch_size=16), batch_size=None,
  num_workers=2)``: each worker reads whole batches into shared memory; the uint8 batch
  made float in the loop by ``hf.Tensors()`` (0.12; ``.float().div_(255)`` before, which
  takes a fresh block of memory a batch);
* ``hf DataLoader, samples``: ``DataLoader(hf.VideoDataset(clip), batch_size=16,
  num_workers=2)``: frame by frame, collated by the loader;
* ``torchcodec``: ``VideoDecoder(clip)`` (0.13.0, CPU, FFmpeg's threads) and
  ``get_frames_in_range`` 16 at a time;
* ``SPDL``: ``spdl.io`` streaming demux and decode (0.8.0, FFmpeg's threads), 16 packets
  at a time, ``convert_frames`` to a tensor.

The clips are made once (``/tmp/hyperframes-loader``): Big Buck Bunny played forwards and
back for ``--frames`` frames at 1280x720 and 1920x1080, H.264 (x264 ``veryfast``, 3
B-frames, a key frame every 250 frames). Each script runs in a process of its own, and
its peak PSS (its processes together, sampled every 20 ms) is read in a second run
beside the timed one (sampling costs CPU: a watched run is slower, the more so the more
processes it has).
Goals: ours >= 1.0x the best peer in frames/s at no more than its peak PSS; the
``DataLoader`` >= 0.9x our iterator.

Run:  pip install torchcodec==0.13.0 spdl-io==0.8.0 spdl-core==0.8.0
      python benchmarks/loader.py [--frames 1500] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from clips import encode_bunny  # this folder's helper: the real clips

CACHE = Path("/tmp/hyperframes-loader")
SCRIPTS = {
    "hf iter_batches": """
import sys, hyperframes as hf
source = hf.VideoSource(sys.argv[1])
frames = 0
for ids, x in hf.Pipeline.from_source(source, batch_size=16).iter_batches(tensors=hf.Tensors()):
    frames += len(x) if float(x.mean()) >= 0 else 0
print(frames)
""",
    "hf DataLoader": """
import sys, hyperframes as hf
from torch.utils.data import DataLoader
if __name__ == "__main__":
    dataset = hf.VideoDataset(sys.argv[1], batch_size=16)  # whole batches, in shared memory
    to_float = hf.Tensors()  # floats made in tensors the loop let go (0.12)
    frames = 0
    for batch in DataLoader(dataset, batch_size=None, num_workers=2):
        x = to_float(batch["frames"])
        frames += len(x) if float(x.mean()) >= 0 else 0
    print(frames)
""",
    "hf DataLoader, samples": """
import sys, hyperframes as hf
from torch.utils.data import DataLoader
if __name__ == "__main__":
    frames = 0
    to_float = hf.Tensors()
    for batch in DataLoader(hf.VideoDataset(sys.argv[1]), batch_size=16, num_workers=2):
        x = to_float(batch["frames"])
        frames += len(x) if float(x.mean()) >= 0 else 0
    print(frames)
""",
    "torchcodec": """
import sys
from torchcodec.decoders import VideoDecoder
decoder = VideoDecoder(sys.argv[1])
frames = 0
for start in range(0, len(decoder), 16):
    x = decoder.get_frames_in_range(start, min(start + 16, len(decoder))).data.float().div_(255)
    frames += len(x) if float(x.mean()) >= 0 else 0
print(frames)
""",
    "SPDL": """
import sys, torch
import spdl.io as io
demuxer = io.Demuxer(sys.argv[1])
decoder = io.Decoder(demuxer.video_codec, filter_desc=io.get_video_filter_desc(pix_fmt="rgb24"),
                     decode_config=io.decode_config(decoder_options={"threads": "0"}))
def tensor(decoded):
    return torch.from_numpy(io.to_numpy(io.convert_frames(decoded))).permute(0, 3, 1, 2)
def batches():
    for packets in demuxer.streaming_demux(demuxer.video_stream_index, num_packets=16):
        for decoded in decoder.streaming_decode_packets(packets):
            yield tensor(decoded).float().div_(255)
    for decoded in decoder.flush():
        yield tensor(decoded).float().div_(255)
frames = 0
for x in batches():
    frames += len(x) if float(x.mean()) >= 0 else 0
print(frames)
""",
}


def run(script: str, clip: Path, *, watch: bool) -> tuple[float, float, int]:
    """Wall seconds, peak PSS (MiB, the process and its children; 0 unless ``watch``) and
    frames read. Reading PSS every 20 ms costs CPU that the script then lacks (more for
    more processes: the DataLoader's three ran 14 % longer watched, our iterator 8 %), so
    the time is taken from a run that is not watched and the memory from one that is."""
    file = CACHE / "script.py"
    file.write_text(script)
    start = time.perf_counter()
    argv = [sys.executable, str(file), str(clip)]
    process = subprocess.Popen(argv, cwd=CACHE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    watched, peak = psutil.Process(process.pid), 0
    while watch and process.poll() is None:
        try:
            tree = [watched, *watched.children(recursive=True)]
            peak = max(peak, sum(p.memory_full_info().pss for p in tree))
        except psutil.Error:
            pass
        time.sleep(0.02)
    out, err = process.communicate()
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{script[:60]!r} failed: {err[-1500:]}")
    return wall, peak / 2**20, int(out.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    clips = {
        f"{height}p": encode_bunny(CACHE / f"bunny-{height}p-{args.frames}.mp4",
                                   size=(width, height), frames=args.frames, gop=250)
        for width, height in ((1280, 720), (1920, 1080))
    }  # fmt: skip
    best: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in clips}
    for _ in range(args.repeats):
        for size, clip in clips.items():
            for name, script in SCRIPTS.items():
                wall, _, frames = run(script, clip, watch=False)
                _, pss, watched = run(script, clip, watch=True)
                assert frames == watched == args.frames, (name, frames, watched)
                old = best[size].get(name, (float("inf"), 0.0))
                best[size][name] = (min(old[0], wall), max(old[1], pss))
                print(f"  {size} {name}: {wall:.2f} s, {pss:.0f} MiB", file=sys.stderr)
    results = {}
    for size, found in best.items():
        print(f"\n{size}, {args.frames} frames, best of {args.repeats}")
        print("| approach | frames/s | wall s | peak PSS MiB |")
        print("|---|---:|---:|---:|")
        for name, (wall, pss) in found.items():
            print(f"| {name} | {args.frames / wall:.1f} | {wall:.2f} | {pss:.0f} |")
        peers = {n: v for n, v in found.items() if not n.startswith("hf")}
        peer = min(peers, key=lambda n: peers[n][0])
        ours = found["hf iter_batches"]
        ratios = {
            f"iter_batches vs {peer} (goal >= 1.0)": peers[peer][0] / ours[0],
            f"DataLoader vs {peer}": peers[peer][0] / found["hf DataLoader"][0],
            "DataLoader vs iter_batches (goal >= 0.9)": ours[0] / found["hf DataLoader"][0],
            f"iter_batches peak PSS / {peer}'s (goal <= 1.0)": ours[1] / peers[peer][1],
            "iter_batches peak PSS / the least peer's": ours[1] / min(p for _, p in peers.values()),
        }
        for what, ratio in ratios.items():
            print(f"{what}: {ratio:.2f}x")
        results[size] = {"best": found, "ratios": ratios}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
