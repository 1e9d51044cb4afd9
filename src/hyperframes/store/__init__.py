"""The hyperframe store: an LMDB container with random access and a tiered cache.

- :mod:`.format`: the bytes (header, state, group table) and their validation.
- :mod:`.writer`: :class:`StoreWriter`, appending groups one transaction each.
- :mod:`.sink`: :class:`StoreSink`, the pipeline end that packs tagged frames.
- :mod:`.lmdb_store`: :class:`FrameStore`, reading frames by index.
- :mod:`.cache`: the hot and warm tiers and their replacement policies.

Example:
    >>> from hyperframes.store import FrameStore, StoreSink
    >>> Pipeline.from_source(src).group().to(StoreSink("clip.hfs")).run()  # doctest: +SKIP
    >>> with FrameStore("clip.hfs") as store:  # doctest: +SKIP
    ...     frame = store[42]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import as_input  # noqa: F401  (registers the store as an input of jobs over many: io.kinds)
from .cache import CacheStats, TieredCache
from .info import StoreInfo
from .lmdb_store import FrameStore
from .sink import StoreSink
from .table import GroupTable
from .writer import StoreWriter

__all__ = [
    "CacheStats",
    "FrameStore",
    "GroupTable",
    "StoreInfo",
    "StoreSink",
    "StoreWriter",
    "TieredCache",
    "is_store",
    "store_info",
]


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a store folder (an LMDB ``data.mdb`` inside a folder).

    A cheap test of the layout; opening the store validates the contents.
    """
    folder = Path(path)
    return folder.is_dir() and (folder / "data.mdb").is_file()


def store_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-ready description of the store at ``path`` (opens and validates it).

    Raises:
        StoreError: not a store, or an unsupported version.
        StoreCorrupt: the header, state or group table fails validation.
    """
    with FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False) as store:
        info = store.info.to_dict()
        lengths = store.groups.lengths
        raw = len(store) * store.header.spec.nbytes
        stored = store.state.stored_bytes
        size = sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())
        info.update(
            path=str(path),
            format_version=store.header.version,
            created_by=store.header.created_by,
            hyperframes=len(store.groups),
            mean_length=round(float(lengths.mean()), 3) if len(lengths) else 0.0,
            max_length=int(lengths.max()) if len(lengths) else 0,
            raw_bytes=raw,
            stored_bytes=stored,
            ratio=round(stored / raw, 6) if raw else None,
            file_bytes=size,
            grouping=store.header.grouping,
            level=store.header.level,
            intra=store.header.intra,
            pixels=store.header.pixels,
        )
        if store.header.gop is not None:  # x264: frames from one keyframe to the next
            info["gop"] = store.header.gop
        if store.header.pixels is not None:  # planes: what a read gives, and what is kept
            kept, layout = store.header.spec, store.header.pixels["layout"]
            info.update(
                shape=list(store.spec.shape),
                dtype=str(store.spec.dtype),
                stored_as=f"{layout} planes, {list(kept.shape)} {kept.dtype}",
            )
        return info
