"""Fuzzing the store's parsers (short form of ``benchmarks/fuzz_store.py``) and security checks."""

from __future__ import annotations

import ast
import collections
import json
import os
import random
import shutil
import socket
import struct
from pathlib import Path

import lmdb
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.hyper.codec import group_header as group_format
from hyperframes.metrics.prometheus import DEFAULT_HOST, PrometheusExporter
from hyperframes.store import FrameStore, StoreWriter
from hyperframes.store import format as fmt

SRC = Path(hf.__file__).parent


def test_twenty_thousand_fuzzed_inputs_give_only_typed_errors(benchmark_module) -> None:
    fuzz = benchmark_module("fuzz_store")
    result = fuzz.fuzz(20_000, seconds=120, seed=1, cap=2.0, trace_every=8, log=False)
    assert result.findings == []
    assert result.inputs == 20_000
    assert result.peak < 8 << 20  # no input made a parser allocate more than a few MiB
    # both outcomes happen for every target: the mutations are neither all fatal nor inert
    for name in result.per_target:
        kinds = {k.split(": ")[1] for k in result.outcomes if k.startswith(name + ":")}
        assert "ok" in kinds and kinds & {"StoreCorrupt", "StoreError"}, (name, kinds)


def test_mutated_whole_stores_give_only_typed_errors(benchmark_module, tmp_path: Path) -> None:
    fuzz = benchmark_module("fuzz_store")
    result = fuzz.fuzz_stores(150, seed=2, root=tmp_path)
    assert result.findings == [] and result.stores == 150


def _store_values(path: Path) -> list[tuple[bytes | None, bytes, bytes]]:
    """Every value of a store: (sub-database or None, key, value)."""
    env = lmdb.open(str(path), subdir=True, max_dbs=2, readonly=True, lock=False)
    with env.begin() as txn:
        values = [(None, key, bytes(txn.get(key))) for key in (fmt.HEADER_KEY, fmt.STATE_KEY)]
        for name in (fmt.TABLE_DB, fmt.RECORDS_DB):
            db = env.open_db(name, txn=txn, create=False)
            values += [(name, bytes(key), bytes(value)) for key, value in txn.cursor(db=db)]
    env.close()
    return values


def _read_or_refuse(path: Path, frames: np.ndarray, where: str) -> collections.Counter[str]:
    """Read every frame one by one, then all at once; each read is refused with a typed
    error or returns exactly the frames written."""
    seen: collections.Counter[str] = collections.Counter()

    def same(got: np.ndarray, want: np.ndarray) -> bool:
        return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)

    with FrameStore(path, read_ahead=False) as store:
        for i in range(len(store)):
            try:
                got = store[i]
            except (hf.StoreCorrupt, hf.StoreError):
                seen["frame refused"] += 1
                continue
            assert i < len(frames) and same(got, frames[i]), (
                f"{where}: frame {i} is not the one written"
            )
            seen["frame exact"] += 1
    with FrameStore(path, read_ahead=False) as store:
        try:
            got = store[0 : len(store)]
        except (hf.StoreCorrupt, hf.StoreError):
            seen["range refused"] += 1
        else:
            assert same(got, frames), (
                f"{where}: frames 0..{len(store) - 1} are not the ones written"
            )
            seen["range exact"] += 1
    return seen


def _swap_first_two_frames(record: bytes) -> bytes:
    """The record with its first two frames' records swapped in its header: well formed,
    every zstd frame intact, and the frames decode to each other's pixels."""
    size = struct.unpack("<I", record[4:8])[0]
    head = json.loads(record[8 : 8 + size])
    a, b = head["frames"][0], head["frames"][1]
    assert a[0] in ("raw", "delta") and b[0] in ("raw", "delta"), head["frames"]
    a[2:4], b[2:4] = b[2:4], a[2:4]  # offset, length
    text = json.dumps(head, separators=(",", ":")).encode()
    assert len(text) == size  # the same numbers in another order: the table's size holds
    return record[:4] + struct.pack("<I", size) + text + record[8 + size :]


def test_no_read_of_a_mutated_store_returns_other_pixels(benchmark_module, tmp_path: Path) -> None:
    """One value of a real store (header, state, a table row or a record) replaced by a
    mutation: every read raises StoreCorrupt/StoreError or gives back exactly the pixels
    that were written, since every frame is checked against its checksum."""
    fuzz = benchmark_module("fuzz_store")
    frames = np.random.default_rng(2).integers(0, 255, (10, 6, 5, 3), dtype=np.uint8)
    pristine = tmp_path / "pristine.hfs"
    with StoreWriter(pristine, hf.FrameSpec((6, 5, 3)), {"fps": 25.0}, workers=1) as writer:
        for a, b in ((0, 4), (4, 5), (5, 10)):
            writer.write_group(frames[a:b])
    values = _store_values(pristine)
    seeds = [value for _, _, value in values]
    rng = random.Random(3)
    # random mutations, then records made to decode to other pixels without a parser
    # noticing: the first two frames' bytes swapped (only the store's checksums can tell)
    mutations = [(*v, fuzz.mutate(v[2], seeds, rng)) for v in rng.choices(values, k=200)]
    mutations += [
        (name, key, value, _swap_first_two_frames(value))
        for name, key, value in values
        if name == fmt.RECORDS_DB and group_format.parse_header(value).count >= 2
    ]
    assert len(mutations) == 202
    seen: collections.Counter[str] = collections.Counter()
    for n, (name, key, _, new) in enumerate(mutations):
        path = tmp_path / f"mutated-{n}.hfs"
        shutil.copytree(pristine, path)
        env = lmdb.open(str(path), subdir=True, max_dbs=2)
        with env.begin(write=True) as txn:
            txn.put(key, new, db=name and env.open_db(name, txn=txn))
        env.close()
        where = f"mutation {n} of {(name or b'main').decode()}[{key!r}]"
        try:
            seen += _read_or_refuse(path, frames, where)
        except (hf.StoreCorrupt, hf.StoreError):
            seen["open refused"] += 1
        shutil.rmtree(path)
    # the mutations are neither all fatal nor all inert
    for outcome in ("open refused", "frame refused", "frame exact", "range refused", "range exact"):
        assert seen[outcome], seen


def test_a_record_that_claims_huge_frames_is_refused_before_decoding(tmp_path: Path) -> None:
    """A crafted record (valid checksum) whose own header claims 60,001 frames of 2 GiB used
    to reach ``np.empty`` (MemoryError, or 8 GiB of address space for 4 frames)."""
    path = tmp_path / "s.hfs"
    with StoreWriter(path, hf.FrameSpec((6, 5, 3)), {}, workers=1) as writer:
        writer.write_group(np.zeros((4, 6, 5, 3), np.uint8))
    records = [group_format.Record("raw", -1, 0, 0)]
    records += [group_format.Record("copy", 0, 0, 0)] * 60_000
    meta = {"dtype": "|u1", "shape": [65536, 32768, 1], "base": 0, "layout": "base",
            "tier": "lossless"}  # fmt: skip
    data = group_format.pack(meta, records, b"")
    env = lmdb.open(str(path), subdir=True, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(fmt.group_key(0), data, db=env.open_db(fmt.RECORDS_DB, txn=txn))
        entry = fmt.GroupEntry(0, 4, len(data), fmt.checksum(data), (0,) * 4, (0.0,) * 4)
        txn.put(fmt.group_key(0), fmt.pack_entry(entry), db=env.open_db(fmt.TABLE_DB, txn=txn))
    env.close()
    with FrameStore(path) as store:
        with pytest.raises(hf.StoreCorrupt, match="holds 60001 frames of 32768x65536, 1 channel"):
            store[0]
        assert store.verify() == [0, 1, 2, 3]


# -- security -----------------------------------------------------------------------------

DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__"}
DANGEROUS_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle"}
# Modules that move *functions* to worker processes the caller started (never file bytes).
PICKLE_ALLOWED = {
    "executors/processes.py",
    "executors/_child.py",
    "executors/_wire.py",
    "executors/_ray_actor.py",
    "chunked.py",
    "executors/ray.py",
}


def _python_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "viewer" not in p.relative_to(SRC).parts)


def test_no_eval_exec_or_pickle_of_file_contents_anywhere_in_the_source() -> None:
    """An AST scan: no eval/exec/compile/__import__ calls, no yaml.load, no numpy
    ``allow_pickle=True``; pickle-like modules only in the executors, which send stage
    functions to their own workers and never read them from files."""
    problems = []
    for path in _python_files():
        rel = str(path.relative_to(SRC))
        tree = ast.parse(path.read_text(), filename=rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")
                if isinstance(fn, ast.Name) and name in DANGEROUS_CALLS:
                    problems.append(f"{rel}:{node.lineno} calls {name}()")
                if name in {"load", "unsafe_load"} and "yaml" in ast.unparse(fn):
                    problems.append(f"{rel}:{node.lineno} uses yaml.{name}")
                for kw in node.keywords:
                    if kw.arg == "allow_pickle" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value is False
                    ):
                        problems.append(f"{rel}:{node.lineno} passes allow_pickle")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for module in names:
                    if module.split(".")[0] in DANGEROUS_MODULES and rel not in PICKLE_ALLOWED:
                        problems.append(f"{rel}:{node.lineno} imports {module}")
    assert problems == []


def test_the_store_and_codec_read_json_never_pickle() -> None:
    for rel in (
        "store/format.py",
        "hyper/codec/group_header.py",
        "store/table.py",
        "store/lmdb_store.py",
        "store/checks.py",
    ):
        text = (SRC / rel).read_text()
        assert "pickle" not in text.replace("never pickle", "").replace("not pickled", ""), rel


def test_metrics_endpoint_binds_to_localhost_by_default() -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    exporter = PrometheusExporter()
    assert exporter.host == "127.0.0.1"
    exporter.start(lambda: {})  # type: ignore[arg-type,return-value]
    try:
        port = exporter.port
        assert exporter.url.startswith("http://127.0.0.1:")
        others = [a for a in _own_addresses() if not a.startswith("127.") and a not in ("::1", "")]
        for address in others[:2]:  # the same port on another interface refuses
            with socket.socket() as sock, pytest.raises(OSError):
                sock.settimeout(1)
                sock.connect((address, port))
    finally:
        exporter.stop(None)


def _own_addresses() -> list[str]:
    import psutil

    return [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET
    ]


def test_image_writes_never_follow_a_link_out_of_the_output_folder(tmp_path: Path) -> None:
    """A name in the output folder that is a symlink to a file outside is replaced, not
    written through (with overwrite), and the outside file is untouched."""
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"keep me")
    folder = tmp_path / "frames"
    folder.mkdir()
    os.symlink(outside, folder / "frame_000000.png")
    frames = np.full((2, 8, 8, 3), 200, np.uint8)
    hf.Pipeline.from_frames(frames).write_images(folder, overwrite=True).run()
    assert outside.read_bytes() == b"keep me"
    assert not (folder / "frame_000000.png").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == ["frame_000000.png", "frame_000001.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames", "outside.png"]


def _planar_seeds() -> list[bytes]:
    """Planar groups (a video's native planes): gradient and FFV1 raw records, deltas,
    copies, lossless H.264 GOPs, 8- and 10-bit, 4:2:0 and gray."""
    from hyperframes.hyper import encode_group
    from hyperframes.io.layouts import Layout

    rng = np.random.default_rng(5)
    seeds = []
    for name, intra in (("yuv420p", "gradient"), ("yuv420p", "ffv1"), ("yuv420p10le", "ffv1"),
                        ("gray", "gradient"), ("yuv420p", "x264"),
                        ("gray10le", "x264")):  # fmt: skip
        layout = Layout.of(name, 16, 8)
        peak = 1023 if layout.dtype.itemsize == 2 else 255
        base = rng.integers(0, peak, layout.shape).astype(layout.dtype)
        frames = np.stack([base, base, base + 1, rng.integers(0, peak, layout.shape)])
        frames = frames.astype(layout.dtype)
        gop = {"gop": 2} if intra == "x264" else {}
        group = encode_group(frames, planes=layout.plane_shapes, pix_fmt=name, intra=intra, **gop)
        seeds.append(group.data)
    return seeds


def test_damaged_planar_records_give_only_typed_errors(benchmark_module) -> None:
    """Mutated planar groups (their JSON header, planes, segments, FFV1 packets, zstd
    frames) only ever raise StoreCorrupt or IndexError, or decode to frames of the header's
    shape (the store's checksums then tell)."""
    from hyperframes.hyper import decode_frame, decode_group

    fuzz = benchmark_module("fuzz_store")
    seeds = _planar_seeds()
    rng = random.Random(18)
    seen: collections.Counter[str] = collections.Counter()
    for _ in range(1500):
        data = fuzz.mutate(rng.choice(seeds), seeds, rng)
        for call in (lambda d: decode_frame(d, rng.randrange(5)), decode_group):
            try:
                out = call(data)
            except (hf.StoreCorrupt, IndexError):
                seen["refused"] += 1
                continue
            head = group_format.parse_header(data)
            assert out.shape[-len(head.shape) :] == head.shape and out.dtype == head.dtype
            seen["decoded"] += 1
    assert seen["refused"] and seen["decoded"], seen


def test_a_damaged_planar_store_never_returns_other_planes(tmp_path: Path) -> None:
    """A planar store whose FFV1, H.264 or gradient record is damaged but re-checksummed (so
    only the codec and the frame checksums stand between it and the reader) refuses the
    frame."""
    from hyperframes.io.layouts import Layout

    layout = Layout.of("yuv420p", 128, 64)
    rng = np.random.default_rng(8)
    smooth = np.add.outer(np.arange(layout.shape[0]), np.arange(layout.shape[1])) // 3
    frames = np.stack([smooth * (i + 1) + rng.integers(0, 9, layout.shape) for i in range(6)])
    frames = frames.astype(np.uint8)
    for intra in ("gradient", "ffv1", "x264"):
        path = tmp_path / f"{intra}.hfs"
        info = {"layout": "yuv420p", "width": 128, "height": 64, "colorspace": 2}
        gop = {"gop": 4} if intra == "x264" else {}
        with StoreWriter(path, layout.spec, info, intra=intra, workers=1, **gop) as writer:
            writer.write_group(frames)
        env = lmdb.open(str(path), subdir=True, max_dbs=2)
        with env.begin(write=True) as txn:
            records, table = (
                env.open_db(fmt.RECORDS_DB, txn=txn),
                env.open_db(fmt.TABLE_DB, txn=txn),
            )
            key = fmt.group_key(0)
            record = bytearray(txn.get(key, db=records))
            head = group_format.parse_header(bytes(record))
            raw = [
                r
                for r in head.records
                if r.kind == "raw" and (r.parts == ()) == (intra != "gradient")
            ]
            assert raw, head  # a packet (FFV1, H.264), or a gradient record in the gradient store
            record[head.payload_start + raw[-1].offset + raw[-1].length // 2] ^= 0x55
            entry = fmt.parse_entry(txn.get(key, db=table), group=0, first=0)
            digest = fmt.checksum(bytes(record))
            fixed = fmt.GroupEntry(
                entry.first, entry.count, len(record), digest, entry.checksums, entry.pts
            )
            txn.put(key, bytes(record), db=records)
            txn.put(key, fmt.pack_entry(fixed), db=table)
        env.close()
        with FrameStore(path, pix_fmt="native", read_ahead=False) as store:
            bad = 0
            for i in range(len(frames)):
                try:
                    got = store[i]
                except hf.StoreCorrupt:
                    bad += 1
                    continue
                assert np.array_equal(got, frames[i])
            assert bad >= 1, intra
            assert store.verify()
