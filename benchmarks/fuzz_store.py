"""Fuzz the store's parsers and readers: only typed errors, no crash, no hang, no big allocation.

Generated inputs are mutations of valid bytes (store headers and states, group-table
rows, encoded groups of several dtypes, tiers and layouts) plus random bytes, fed to:

- ``store.format``: ``parse_header``, ``parse_state``, ``parse_entry``, ``key_group``;
- ``hyper.codec.group_header.parse_header``, ``hyper.decode_frame`` and ``hyper.decode_group``;
- whole small stores (``--stores``): one value of a real LMDB store (header, state, a
  table row or a record) replaced by a mutation, then ``FrameStore`` opens it, verifies
  it and reads every frame.

Mutations: bit flips, random bytes, insertions, deletions, truncation, splices of two
seeds, JSON numbers replaced by lies (``-1``, ``2**32``, ``1e308``, ``NaN``, ``[]``...),
binary size fields overwritten with boundary values, and plain random bytes.

Allowed outcomes: success, :class:`~hyperframes.errors.StoreCorrupt` /
:class:`~hyperframes.errors.StoreError` (both ``ValueError``), and ``IndexError`` from
``decode_frame`` for an index outside the group. Anything else is a finding, and so is
an input that takes longer than ``--cap`` seconds or allocates more than ``--max-alloc``
bytes at its peak (``tracemalloc``, which sees numpy's buffers too).

Run: ``python benchmarks/fuzz_store.py [--inputs 1000000] [--seconds 600] [--stores 2000]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import random
import re
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hyperframes.errors import StoreCorrupt, StoreError
from hyperframes.frames import FrameSpec
from hyperframes.hyper.codec import group_header as group_format
from hyperframes.hyper.codec.coder import decode_frame, decode_group, encode_group
from hyperframes.store import format as fmt

ALLOWED: tuple[type[BaseException], ...] = (StoreCorrupt, StoreError)
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
LIES = (b"0", b"-1", b"1", b"2147483648", b"4294967295", b"4294967296", b"65536", b"65537",
        b"18446744073709551616", b"1e308", b"-1e308", b"1.5", b"NaN", b"Infinity", b"true",
        b"null", b'"7"', b"[]", b"{}", b"[1,2]", b"999999999999999999999999")  # fmt: skip
BOUNDARY = (0, 1, 2, 7, 255, 256, 65535, 65536, 65537, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
            2**40, 2**63 - 1, 2**64 - 1)  # fmt: skip


class Hang(Exception):
    """Raised by the alarm when one input runs past the cap."""


@dataclass
class Result:
    inputs: int = 0
    seconds: float = 0.0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    per_target: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[str] = field(default_factory=list)
    slowest: float = 0.0
    peak: int = 0
    stores: int = 0
    traced: int = 0

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0


# -- seeds ------------------------------------------------------------------------------


def group_seeds() -> list[bytes]:
    """Valid encoded groups: dtypes, layouts and tiers the codec writes."""
    rng = np.random.default_rng(1)
    base = rng.integers(0, 200, (4, 6, 5, 3)).astype(np.uint8)
    base[1:] += np.arange(1, 4, dtype=np.uint8)[:, None, None, None]
    seeds = []
    for layout in ("auto", "base", "chain", "independent"):
        seeds.append(encode_group(base, layout=layout).data)  # type: ignore[arg-type]
    seeds.append(encode_group(base.astype(np.uint16) * 250).data)
    seeds.append(encode_group(base.astype(np.float32) / 7).data)
    seeds.append(encode_group(base, tier="psnr", psnr=30).data)
    seeds.append(encode_group(base, tier="keyframe").data)
    seeds.append(encode_group(np.repeat(base[:1], 3, axis=0)).data)  # copies
    seeds.append(encode_group(base[:1, :, :, 0]).data)
    return seeds


def store_seeds() -> dict[str, list[bytes]]:
    header = fmt.StoreHeader(
        FrameSpec((6, 5, 3)), {"fps": 25.0, "rate": "25/1", "codec": "ffv1", "path": "a.mkv"},
        "lossless", None, 3, {"threshold": 0.001, "min_len": 2, "max_len": 8}, "0.1.0",
    )  # fmt: skip
    lossy = fmt.StoreHeader(FrameSpec((720, 1280, 3), "<u2"), {}, "psnr", 42.5, 9, None, "x")
    states = [fmt.StoreState(3, 20, 1234, False, None), fmt.StoreState(1, 4, 99, True, 41.2)]
    entries = [
        fmt.GroupEntry(0, 4, 321, 2**63 + 5, (1, 2, 3, 4), (0.0, 0.04, 0.08, 0.12)),
        fmt.GroupEntry(0, 1, 10, 0, (9,), (float("nan"),)),
    ]
    return {
        "header": [fmt.dump_json(h.to_json()) for h in (header, lossy)],
        "state": [fmt.dump_state(s) for s in states],
        "entry": [fmt.pack_entry(e) for e in entries],
        "key": [fmt.group_key(0), fmt.group_key(2**40)],
    }


# -- mutations --------------------------------------------------------------------------


def mutate(data: bytes, seeds: list[bytes], rng: random.Random) -> bytes:
    """One to three random mutations of ``data``."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        out = bytearray(_MUTATORS[rng.randrange(len(_MUTATORS))](bytes(out), seeds, rng))
    return bytes(out)


def _flip(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    if not d:
        return d
    b = bytearray(d)
    for _ in range(r.randint(1, 4)):
        b[r.randrange(len(b))] ^= 1 << r.randrange(8)
    return bytes(b)


def _set_bytes(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    if not d:
        return d
    b = bytearray(d)
    for _ in range(r.randint(1, 8)):
        b[r.randrange(len(b))] = r.choice((0, 0xFF, 0x7F, 0x80, r.randrange(256)))
    return bytes(b)


def _insert(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    at = r.randint(0, len(d))
    return d[:at] + r.randbytes(r.randint(1, 64)) + d[at:]


def _delete(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    if not d:
        return d
    at = r.randrange(len(d))
    return d[:at] + d[at + r.randint(1, 64) :]


def _truncate(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    return d[: r.randint(0, len(d))]


def _splice(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    other = r.choice(s)
    return d[: r.randint(0, len(d))] + other[r.randint(0, len(other)) :]


def _json_lie(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    spots = [m.span() for m in NUMBER.finditer(d)]
    if not spots:
        return _set_bytes(d, s, r)
    a, b = r.choice(spots)
    return d[:a] + r.choice(LIES) + d[b:]


def _size_lie(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    """A boundary value written over a 4- or 8-byte field (size fields live up front)."""
    width = r.choice((4, 8))
    if len(d) < width:
        return d
    limit = min(len(d) - width, 64)
    at = r.choice((4, 12, 16, 24)) if r.random() < 0.5 and limit >= 24 else r.randint(0, limit)
    value = r.choice(BOUNDARY) % (1 << (8 * width))
    fmt_ = "<I" if width == 4 else "<Q"
    return d[:at] + struct.pack(fmt_, value) + d[at + width :]


def _random(d: bytes, s: list[bytes], r: random.Random) -> bytes:
    return r.randbytes(r.randint(0, 256))


_MUTATORS: tuple[Callable[[bytes, list[bytes], random.Random], bytes], ...] = (
    _flip, _set_bytes, _insert, _delete, _truncate, _splice, _json_lie, _json_lie, _size_lie,
    _size_lie, _random,
)  # fmt: skip


# -- targets ----------------------------------------------------------------------------


def _decode_frame_any(data: bytes) -> None:
    for index in (0, 3):
        with contextlib.suppress(IndexError):  # an index outside the group: documented
            decode_frame(data, index)


def targets() -> list[tuple[str, Callable[[bytes], Any], list[bytes]]]:
    groups, store = group_seeds(), store_seeds()
    return [
        ("store.parse_header", fmt.parse_header, store["header"]),
        ("store.parse_state", fmt.parse_state, store["state"]),
        ("store.parse_entry", lambda d: fmt.parse_entry(d, group=0, first=0), store["entry"]),
        ("store.key_group", fmt.key_group, store["key"]),
        ("group.parse_header", group_format.parse_header, groups),
        ("group.decode_frame", _decode_frame_any, groups),
        ("group.decode_group", decode_group, groups),
    ]


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang


def fuzz(
    count: int,
    *,
    seconds: float = 600.0,
    seed: int = 0,
    cap: float = 2.0,
    max_alloc: int = 64 << 20,
    trace_every: int = 8,
    log: bool = True,
) -> Result:
    """Feed up to ``count`` generated inputs (fewer if ``seconds`` run out) to the targets.

    Every ``trace_every``-th input runs under ``tracemalloc`` (0: none), which costs about
    3x; :func:`main` also caps the address space so that any larger allocation fails.
    """
    rng = random.Random(seed)
    table = targets()
    result = Result()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    began = time.perf_counter()
    next_log = began + 10
    try:
        for i in range(count):
            name, fn, seeds = table[i % len(table)]
            data = rng.randbytes(rng.randint(0, 128)) if rng.random() < 0.03 else None
            if data is None:
                data = mutate(rng.choice(seeds), seeds, rng)
            trace = bool(trace_every) and i % trace_every == 0
            _one(name, fn, data, result, cap, max_alloc, trace)
            result.inputs += 1
            if i % 1000 == 0:
                now = time.perf_counter()
                if now - began > seconds:
                    break
                if log and now > next_log:
                    print(f"{result.inputs:,} inputs, {result.inputs / (now - began):,.0f}/s, "
                          f"{len(result.findings)} findings", flush=True)  # fmt: skip
                    next_log = now + 10
    finally:
        result.seconds = time.perf_counter() - began
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return result


def _one(
    name: str, fn: Callable[[bytes], Any], data: bytes, result: Result, cap: float,
    max_alloc: int, trace: bool,
) -> None:  # fmt: skip
    if trace:
        tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, cap)
    t0 = time.perf_counter()
    try:
        fn(data)
        outcome = "ok"
    except ALLOWED as exc:
        outcome = type(exc).__name__
    except Hang:
        outcome = "HANG"
        result.findings.append(f"{name}: over {cap} s on {data[:80]!r}")
    except BaseException as exc:  # a finding: report it, keep fuzzing
        outcome = f"UNTYPED {type(exc).__name__}"
        result.findings.append(f"{name}: {type(exc).__name__}: {exc} on {data[:80]!r}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    took = time.perf_counter() - t0
    result.slowest = max(result.slowest, took)
    if trace:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        result.traced += 1
        result.peak = max(result.peak, peak)
        if peak > max_alloc:
            result.findings.append(f"{name}: allocated {peak:,} bytes on {data[:80]!r}")
    result.outcomes[f"{name}: {outcome}"] += 1
    result.per_target[name] += 1


# -- whole stores -----------------------------------------------------------------------


def fuzz_stores(count: int, *, seed: int = 0, root: Path | None = None) -> Result:
    """Replace one value of a real store by a mutation; open, verify and read it all."""
    import lmdb

    from hyperframes.store import FrameStore, StoreWriter

    rng = random.Random(seed)
    result = Result()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hf-fuzz-", dir=root) as tmp:
        path = Path(tmp) / "s.hfs"
        frames = np.random.default_rng(2).integers(0, 255, (10, 6, 5, 3), dtype=np.uint8)
        with StoreWriter(path, FrameSpec((6, 5, 3)), {"fps": 25.0}, workers=1) as writer:
            for a, b in ((0, 4), (4, 5), (5, 10)):
                writer.write_group(frames[a:b])
        pristine = Path(tmp) / "pristine"
        shutil.copytree(path, pristine)
        env = lmdb.open(str(pristine), subdir=True, max_dbs=2, readonly=True, lock=False)
        values: list[tuple[bytes | None, bytes, bytes]] = []
        with env.begin() as txn:
            for key in (fmt.HEADER_KEY, fmt.STATE_KEY):
                values.append((None, key, bytes(txn.get(key))))
            for db_name in (fmt.TABLE_DB, fmt.RECORDS_DB):
                db = env.open_db(db_name, txn=txn, create=False)
                for key, value in txn.cursor(db=db):
                    values.append((db_name, bytes(key), bytes(value)))
        env.close()
        seeds = [v for _, _, v in values]
        for _ in range(count):
            shutil.rmtree(path)
            shutil.copytree(pristine, path)
            db_name, key, value = rng.choice(values)
            new = mutate(value, seeds, rng)
            env = lmdb.open(str(path), subdir=True, max_dbs=2)
            with env.begin(write=True) as txn:
                db = None if db_name is None else env.open_db(db_name, txn=txn)
                txn.put(key, new, db=db)
            env.close()
            where = f"{(db_name or b'main').decode()}[{key!r}]"
            try:
                with FrameStore(path, read_ahead=False) as store:
                    store.verify()
                    for i in range(len(store)):
                        with contextlib.suppress(StoreCorrupt):
                            store[i]
                outcome = "ok"
            except ALLOWED as exc:
                outcome = type(exc).__name__
            except BaseException as exc:
                outcome = f"UNTYPED {type(exc).__name__}"
                result.findings.append(f"store {where}: {type(exc).__name__}: {exc}")
            result.outcomes[f"store: {outcome}"] += 1
            result.stores += 1
    result.inputs = result.stores
    result.seconds = time.perf_counter() - began
    return result


_CAP_NOTE = ""


def cap_address_space(headroom: int) -> tuple[int, int]:
    """Limit this process's address space to what it uses now plus ``headroom`` bytes, so a
    size field that makes a parser allocate more fails loudly (``MemoryError``, a finding)."""
    global _CAP_NOTE
    import psutil

    before = resource.getrlimit(resource.RLIMIT_AS)
    limit = psutil.Process().memory_info().vms + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    _CAP_NOTE = f"{limit / 2**30:.1f} GiB (in use at start + {headroom / 2**30:.1f} GiB)"
    return before


def report(result: Result, stores: Result | None = None) -> str:
    lines = [
        f"inputs: {result.inputs:,} in {result.seconds:.1f} s ({result.rate:,.0f} inputs/s)",
        f"slowest input: {result.slowest * 1000:.1f} ms; largest allocation peak: "
        f"{result.peak / 1024:,.0f} KiB (of {result.traced:,} traced inputs)",
        f"address space capped at {_CAP_NOTE or 'no cap'}",
        "outcomes:",
    ]
    lines += [f"  {key:<48}{n:>10,}" for key, n in sorted(result.outcomes.items())]
    if stores is not None:
        lines.append(f"whole stores: {stores.stores:,} mutated stores in {stores.seconds:.1f} s")
        lines += [f"  {key:<48}{n:>10,}" for key, n in sorted(stores.outcomes.items())]
    findings = result.findings + (stores.findings if stores else [])
    lines.append(f"findings: {len(findings)}")
    lines += [f"  {f}" for f in findings[:30]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=900.0, help="stop after this long")
    parser.add_argument("--stores", type=int, default=2000, help="mutated whole stores")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=float, default=2.0, help="seconds allowed per input")
    parser.add_argument("--max-alloc", type=int, default=64 << 20, help="bytes per input")
    parser.add_argument("--trace-every", type=int, default=8, help="tracemalloc 1 in N")
    parser.add_argument("--headroom", type=int, default=1 << 30, help="address space cap")
    args = parser.parse_args()
    soft_limit = cap_address_space(args.headroom)
    result = fuzz(
        args.inputs, seconds=args.seconds, seed=args.seed, cap=args.cap,
        max_alloc=args.max_alloc, trace_every=args.trace_every,
    )  # fmt: skip
    resource.setrlimit(resource.RLIMIT_AS, soft_limit)  # LMDB maps 64 GiB of address space
    stores = fuzz_stores(args.stores, seed=args.seed) if args.stores else None
    print(report(result, stores))
    bad = len(result.findings) + (len(stores.findings) if stores else 0)
    print(f"verdict: {'held' if not bad else 'NOT HELD'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
