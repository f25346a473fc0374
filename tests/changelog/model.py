"""The obviously-correct model of a store history: a dict per version, replayed write by write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

KeyValue = tuple[bytes, bytes]

#: Every store backend: each contract test runs on all of them.
#: the stores of one library entry per state entry, the arranged store (its hosts' own
#: behaviour: tests/statestore/test_hosts.py) and memory
BACKENDS = ["memory", "rocksdb-kv", "lmdb-kv", "arranged"]


@dataclass(frozen=True)
class Write:
    """One version's writes, with the store's rule: range deletes, then deletes, then puts."""

    puts: Sequence[KeyValue] = ()
    deletes: Sequence[bytes] = ()
    delete_ranges: Sequence[tuple[bytes, bytes]] = ()

    def apply(self, state: dict[bytes, bytes]) -> dict[bytes, bytes]:
        after = {k: v for k, v in state.items()
                 if not any(start <= k < end for start, end in self.delete_ranges)}
        for key in self.deletes:
            after.pop(key, None)
        after.update(self.puts)
        return after


@dataclass
class Model:
    """States after each version of a history (``states[v]``)."""

    states: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    writes: dict[int, Write] = field(default_factory=dict)

    def apply(self, version: int, write: Write) -> None:
        """The state at ``version`` becomes the one before it with ``write``; later ones go."""
        before = self.states.get(version - 1, {})
        self.states[version] = write.apply(before)
        self.writes[version] = write
        for later in [v for v in self.states if v > version]:
            del self.states[later]
            self.writes.pop(later, None)

    @property
    def newest(self) -> int | None:
        return max(self.states, default=None)
