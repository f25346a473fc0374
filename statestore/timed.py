"""A store that times every call into the store it wraps: benchmark instrumentation.

    timer = StoreTimer()
    store = TimedStore(inner, timer)     # or timer.wrap(inner)
    store.multi_get(keys)                # exactly what inner.multi_get(keys) returns
    timer.seconds, timer.calls           # perf_counter seconds spent inside inner, and the calls

``TimedStore`` has the :class:`~streamjoin.statestore.base.Store` interface and changes no result:
each operation calls the wrapped store's same public method with the same arguments and returns
what it returns (or raises what it raises), adding the ``time.perf_counter()`` seconds spent inside
that call to its :class:`StoreTimer`. A scan's iterator is timed too: the call that opens it and
every step the caller takes through it. The wrapper's own work (the argument checks every
:class:`Store` makes before calling the wrapped one) is not counted. Several wrappers may share one
timer (one per task, summed over a run). Nothing outside benchmarks uses it: the runtime wraps a
task's store only when asked (``wrap_store`` of :func:`streamjoin.runtime.task.run_task`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import pyarrow as pa

from streamjoin.statestore.base import KeyValue, Store, StoreStats
from streamjoin.statestore.chunks import SortedChunks
from streamjoin.statestore.columns import Chunk, ColumnWrite, PrefixScan

__all__ = ["StoreTimer", "TimedStore"]

_T = TypeVar("_T")


@dataclass
class StoreTimer:
    """Seconds spent inside the stores it wrapped (``perf_counter``), and how many calls made them
    (a scan counts once, however many entries it yields)."""

    seconds: float = 0.0
    calls: int = 0

    def wrap(self, store: Store) -> "TimedStore":
        """``store`` behind a :class:`TimedStore` adding to this timer (a ``wrap_store`` for
        :func:`streamjoin.runtime.task.run_task`)."""
        return TimedStore(store, self)


class TimedStore(Store):
    """``inner`` with the time of every call into it added to ``timer`` (see module). Closing it
    closes ``inner``; its :meth:`memo` is ``inner``'s."""

    kind = "timed"

    def __init__(self, inner: Store, timer: StoreTimer | None = None) -> None:
        super().__init__(inner.path)
        self.inner = inner
        self.timer = timer if timer is not None else StoreTimer()

    def __repr__(self) -> str:
        return f"TimedStore({self.inner!r})"

    def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        """``method(*args)``, its seconds added to the timer whether it returns or raises."""
        timer = self.timer
        began = time.perf_counter()
        try:
            return method(*args)
        finally:
            timer.seconds += time.perf_counter() - began
            timer.calls += 1

    def _timed(self, entries: Iterator[_T]) -> Iterator[_T]:
        """``entries``, each step through it timed."""
        timer = self.timer
        while True:
            began = time.perf_counter()
            try:
                entry = next(entries)
            except StopIteration:
                return
            finally:
                timer.seconds += time.perf_counter() - began
            yield entry

    def _get(self, key: bytes) -> bytes | None:
        return self._call(self.inner.get, key)

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return self._call(self.inner.multi_get, keys)

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        return self._timed(self._call(self.inner.scan, start, end, reverse))

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        return self._call(self.inner.scan_ranges, ranges)

    def _scan_columns(self, start: bytes | None, end: bytes | None) -> Iterator[Chunk]:
        return self._timed(self._call(self.inner.scan_columns, start, end))

    def scan_prefixes(self, prefixes: Iterable[bytes]) -> list[list[KeyValue]]:
        """The wrapped store's own ``scan_prefixes`` (its batched path), timed."""
        self._check_open()
        return self._call(self.inner.scan_prefixes, prefixes)

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        self._call(self.inner.write, puts, deletes, delete_ranges, version)

    def _write_columns(self, write: ColumnWrite, version: int | None) -> None:
        self._call(self.inner.write_columns, write, version)

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        return self._call(self.inner.multi_get_column, keys)

    def _scan_prefixes_columns(self, prefixes: pa.Array) -> PrefixScan:
        return self._call(self.inner.scan_prefixes_columns, prefixes)

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        return self._call(self.inner.load_sorted, items, version)

    def _rebase(self, items: SortedChunks) -> bool:
        return self._call(self.inner.rebase, items)

    def _snapshot_follows(self) -> None:
        self.inner.snapshot_follows()

    def _hand_over(self) -> None:
        self.inner.hand_over()

    def _version(self) -> int | None:
        return self._call(lambda: self.inner.version)

    def _owner(self) -> bytes | None:
        return self._call(lambda: self.inner.owner)

    def _check_files(self) -> None:
        self._call(self.inner.check_files)

    def _stats(self) -> StoreStats:
        return self._call(self.inner.stats)

    def memo(self) -> dict[str, Any]:
        """The wrapped store's memo (it outlives this wrapper)."""
        self._check_open()
        return self.inner.memo()

    def _close(self) -> None:
        self.inner.close()
