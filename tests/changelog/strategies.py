"""Hypothesis strategies for store write histories over a small key space with awkward keys."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.changelog.model import Write

#: Keys chosen to sit on boundaries: prefixes, 0x00 and 0xff bytes. (Not the empty key: LMDB keys
#: are 1 to 511 bytes, so the store contract leaves it out; it still bounds range deletes.)
KEYS = [b"\x00", b"a", b"a\x00", b"ab", b"b", b"b\xff", b"c", b"\xff", b"\xff\xff"]

keys = st.sampled_from(KEYS)
bounds = st.sampled_from([b"", *KEYS])
values = st.binary(max_size=4)

writes = st.builds(
    Write,
    puts=st.lists(st.tuples(keys, values), max_size=6),
    deletes=st.lists(keys, max_size=3),
    delete_ranges=st.lists(st.tuples(bounds, bounds), max_size=2),
)
