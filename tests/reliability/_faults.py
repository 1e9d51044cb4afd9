"""A disk that fails under the store writer: LMDB writes that raise EIO after k bytes.

:func:`failing_store_writes` wraps :func:`hyperframes.store._env.acquire` so that the
writable environment it hands out is a proxy whose write transactions fail once ``k``
bytes have been put: either at the ``put`` that crosses ``k`` (``at="put"``) or at the
commit of its transaction (``at="commit"``, the transaction is aborted, as when the
device refuses the pages). Readers get the real environment.

Example:
    >>> with failing_store_writes(monkeypatch, after=1 << 20) as disk:  # doctest: +SKIP
    ...     pipeline.run()
    >>> disk.failures  # doctest: +SKIP
    1
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any, Literal

import lmdb
import pytest

from hyperframes.store import _env

EIO = "Input/output error"


@dataclasses.dataclass
class FailingDisk:
    """How many bytes may still be written, and how the writes fail after that.

    Args:
        after: bytes the store may write before every further write fails.
        at: fail the ``put`` that crosses the limit, or the ``commit`` of its transaction.
        times: fail this many times, then write again (a transient fault); ``None``: for good.
    """

    after: int
    at: Literal["put", "commit"] = "put"
    times: int | None = None
    written: int = 0
    failures: int = 0

    def spend(self, size: int) -> bool:
        """Count ``size`` bytes; whether this write must fail."""
        if self.written + size <= self.after or (
            self.times is not None and self.failures >= self.times
        ):
            self.written += size
            return False
        self.failures += 1
        return True


class _Txn:
    """A write transaction whose puts count against the disk."""

    def __init__(self, txn: lmdb.Transaction, disk: FailingDisk) -> None:
        self._txn, self._disk, self._doomed = txn, disk, False

    def put(self, key: bytes, value: bytes, **options: Any) -> bool:
        if self._disk.spend(len(key) + len(value)):
            if self._disk.at == "put":
                raise lmdb.Error(f"mdb_put: {EIO}")
            self._doomed = True
        return bool(self._txn.put(key, value, **options))

    def __enter__(self) -> _Txn:
        self._txn.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any:
        if kind is None and self._doomed:
            self._txn.abort()
            raise lmdb.Error(f"mdb_txn_commit: {EIO}")
        return self._txn.__exit__(kind, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)


class _Env:
    """An environment whose write transactions are :class:`_Txn`."""

    def __init__(self, env: lmdb.Environment, disk: FailingDisk) -> None:
        self._env, self._disk = env, disk

    def begin(self, *args: Any, write: bool = False, **options: Any) -> Any:
        txn = self._env.begin(*args, write=write, **options)
        return _Txn(txn, self._disk) if write else txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@contextlib.contextmanager
def failing_store_writes(
    monkeypatch: pytest.MonkeyPatch,
    *,
    after: int,
    at: Literal["put", "commit"] = "put",
    times: int | None = None,
) -> Iterator[FailingDisk]:
    """Stores opened for writing in the block fail their writes after ``after`` bytes."""
    disk = FailingDisk(after, at, times)
    real = _env.acquire

    def acquire(path: Any, *, writable: bool, create: bool = False) -> _env.Handles:
        handles = real(path, writable=writable, create=create)
        if not writable:
            return handles
        return dataclasses.replace(handles, env=_Env(handles.env, disk))

    with monkeypatch.context() as patch:
        patch.setattr(_env, "acquire", acquire)
        yield disk
