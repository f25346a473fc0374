"""A seeded generator of the timeline job's inputs: the same config gives the same files.

Under ``root`` it writes two **plain change tables** (the plain vocabulary, docs/design/semantics.md "Enrichment": ``op`` in
``insert``/``update``/``delete``, change time ``changed_at``; an update carries the whole new row,
a delete only the key), one Parquet file per micro-batch, ``part-NNNN.parquet``, rows shuffled:

* ``posts/`` (``post_id, op, changed_at, author_id, text``): posts are created in every batch
  (authors drawn with a popularity skew); from the second batch on, some are edited (new text), some
  **reassigned to another author** (a change of join key) and some deleted.
* ``follows/`` (``follow_id, op, changed_at, follower_id, followee_id``): the first batch has
  every user's initial follows; later batches add follows, **unfollow** (delete) and edit some
  (the follow now points at another user: a change of join key on the other side).

Batch ``b`` holds the changes of hour ``b``; a row changes at most once per batch. Both tables
also get a few **stale** changes (an old version of a row sent again, with a change time before the
row's last change, which the join must ignore) and **deletes of unknown rows** (ids never created).

At the showcase batch (the middle one) one user, chosen deterministically (the user with the
smallest timeline of at least three posts who follows an author with posts and another author with
at least two), unfollows the first author, and a post of the second is deleted: the job shows that
user's timeline before and after. Files get increasing modification times, the order Spark's file
source reads them in.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["TimelineConfig", "Showcase", "Generated", "write_timeline_inputs", "POSTS_SCHEMA", "FOLLOWS_SCHEMA"]

_US = 1_000_000
_HOUR_US = 3600 * _US
_UNKNOWN_ID = 1_000_000_000   # ids from here on were never created: their deletes are unknown
_WORDS = ("coffee", "trail", "river", "deploy", "garden", "chess", "jazz", "rain", "bread", "bikes", "stars",
          "tea", "code", "maps", "books", "snow")
POSTS_SCHEMA = pa.schema([("post_id", pa.int64()), ("op", pa.string()), ("changed_at", pa.timestamp("us", "UTC")),
                          ("author_id", pa.int64()), ("text", pa.string())])
FOLLOWS_SCHEMA = pa.schema([("follow_id", pa.int64()), ("op", pa.string()),
                            ("changed_at", pa.timestamp("us", "UTC")), ("follower_id", pa.int64()),
                            ("followee_id", pa.int64())])


@dataclass(frozen=True)
class TimelineConfig:
    """Sizes and rates of the timeline inputs (rates are shares of the live rows, per batch)."""

    posts: int = 2_000            # posts created over all batches
    users: int = 300
    batches: int = 8
    follows_per_user: int = 5     # on average, at the start
    edit_rate: float = 0.06
    reassign_rate: float = 0.02
    post_delete_rate: float = 0.03
    follow_rate: float = 0.04     # new follows per batch, as a share of the live follows
    unfollow_rate: float = 0.03
    follow_edit_rate: float = 0.01
    stale_rate: float = 0.005
    unknown_deletes: int = 2      # per table and batch, from the second batch on
    seed: int = 5
    start_us: int = 1_767_225_600 * _US   # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class Showcase:
    """The planted unfollow and post deletion whose effect on one user's timeline the job shows."""

    user: int
    batch: int
    follow_id: int          # the follow deleted (the unfollow)
    unfollowed: int         # the author no longer followed
    post_id: int            # the post deleted
    post_author: int


@dataclass
class Generated:
    """What was written: change counts per table and kind, the showcase, the file count."""

    posts: Counter = field(default_factory=Counter)
    follows: Counter = field(default_factory=Counter)
    showcase: Showcase | None = None
    batches: int = 0


class _Table:
    """One table being generated: live rows, each key's change times, this batch's changes."""

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.rows: dict[int, tuple] = {}
        self.times: dict[int, list[int]] = {}
        self.history: dict[int, list[tuple]] = {}
        self.batch: list[tuple] = []
        self.touched: set[int] = set()

    def change(self, key: int, op: str, time: int, row: tuple | None, kind: str, counts: Counter) -> None:
        self.batch.append((key, op, time, *(row or (None,) * len(self.columns))))
        counts[kind] += 1
        if kind in ("stale", "unknown_delete"):
            return      # no effect on the table
        self.touched.add(key)
        self.times.setdefault(key, []).append(time)
        if op == "delete":
            self.rows.pop(key, None)
        else:
            assert row is not None, "a change other than a delete carries its row"
            self.rows[key] = row
            self.history.setdefault(key, []).append(row)

    def sample(self, rng: np.random.Generator, rate: float, exclude: AbstractSet[int] = frozenset()) -> list[int]:
        """Live keys not yet changed this batch, about ``rate`` of the live rows, in key order."""
        keys = sorted(k for k in self.rows if k not in self.touched and k not in exclude)
        n = min(len(keys), int(rng.binomial(len(self.rows), rate)) if self.rows else 0)
        return sorted(rng.choice(keys, n, replace=False).tolist()) if n else []


def write_timeline_inputs(root: str, config: TimelineConfig = TimelineConfig()) -> Generated:
    """Write ``posts/`` and ``follows/`` under ``root`` (see module docstring); return what was written."""
    rng = np.random.default_rng(config.seed)
    posts, follows = _Table(("author_id", "text")), _Table(("follower_id", "followee_id"))
    out = Generated(batches=config.batches)
    popularity = 1.0 / np.arange(1, config.users + 1) ** 0.6
    popularity = (popularity / popularity.sum())[rng.permutation(config.users)]
    showcase_batch = max(1, config.batches // 2) if config.batches > 1 else None
    need = 10 * (config.posts + config.users * config.follows_per_user) + 100
    for b in range(config.batches):
        times = iter((config.start_us + b * _HOUR_US + rng.choice(_HOUR_US, need, replace=False)).tolist())
        posts.batch, follows.batch, posts.touched, follows.touched = [], [], set(), set()
        if b == showcase_batch:
            out.showcase = _plant_showcase(posts, follows, times, out, b)
        _post_changes(posts, b, config, rng, popularity, times, out.posts)
        _follow_changes(follows, b, config, rng, popularity, times, out.follows)
        if b > 0:
            for table, counts in ((posts, out.posts), (follows, out.follows)):
                _stale_and_unknown(table, rng, config, counts, b, times)
        _write(root, "posts", b, posts.batch, POSTS_SCHEMA, rng)
        _write(root, "follows", b, follows.batch, FOLLOWS_SCHEMA, rng)
    return out


def _post_changes(posts: _Table, b: int, config: TimelineConfig, rng: np.random.Generator, popularity: np.ndarray,
                  times, counts: Counter) -> None:
    """Batch ``b``'s new posts, then edits, moves to another author and deletes of existing ones."""
    created = config.posts // config.batches + (config.posts % config.batches if b == 0 else 0)
    first = config.posts // config.batches * b + (config.posts % config.batches if b else 0)
    for pid in range(first, first + created):
        author = int(rng.choice(config.users, p=popularity))
        posts.change(pid, "insert", next(times), (author, _text(rng)), "insert", counts)
    if b == 0:
        return
    for pid in posts.sample(rng, config.edit_rate):
        posts.change(pid, "update", next(times), (posts.rows[pid][0], _text(rng, edited=True)), "update", counts)
    for pid in posts.sample(rng, config.reassign_rate):
        author = int(rng.choice(config.users, p=popularity))
        if author != posts.rows[pid][0]:
            posts.change(pid, "update", next(times), (author, posts.rows[pid][1]), "reassign", counts)
    for pid in posts.sample(rng, config.post_delete_rate):
        posts.change(pid, "delete", next(times), None, "delete", counts)


def _follow_changes(follows: _Table, b: int, config: TimelineConfig, rng: np.random.Generator,
                    popularity: np.ndarray, times, counts: Counter) -> None:
    """The initial follows (batch 0), then new follows, unfollows and follows edited to another followee."""
    pairs = set(follows.rows.values())
    wanted = (config.users * config.follows_per_user if b == 0
              else int(rng.binomial(len(follows.rows), config.follow_rate)))
    next_id = max(follows.times, default=-1) + 1
    for _ in range(wanted):
        pair = (int(rng.integers(config.users)), int(rng.choice(config.users, p=popularity)))
        if pair[0] != pair[1] and pair not in pairs:
            pairs.add(pair)
            follows.change(next_id, "insert", next(times), pair, "insert", counts)
            next_id += 1
    if b == 0:
        return
    for fid in follows.sample(rng, config.unfollow_rate):
        follows.change(fid, "delete", next(times), None, "delete", counts)
    for fid in follows.sample(rng, config.follow_edit_rate):
        pair = (follows.rows[fid][0], int(rng.choice(config.users, p=popularity)))
        if pair[0] != pair[1] and pair not in pairs:
            pairs.add(pair)
            follows.change(fid, "update", next(times), pair, "reassign", counts)


def _text(rng: np.random.Generator, edited: bool = False) -> str:
    words = " ".join(rng.choice(_WORDS, 3).tolist())
    return f"{words} (edited)" if edited else words


def _plant_showcase(posts: _Table, follows: _Table, times, out: Generated, batch: int) -> Showcase | None:
    """Pick the showcase user (see module docstring) and write its unfollow and post deletion."""
    by_author: dict[int, list[int]] = {}
    for pid, (author, _) in posts.rows.items():
        by_author.setdefault(author, []).append(pid)
    followed: dict[int, list[tuple[int, int]]] = {}
    for fid, (follower, followee) in follows.rows.items():
        followed.setdefault(follower, []).append((followee, fid))
    candidates = []
    for user, edges in followed.items():
        size = sum(len(by_author.get(a, ())) for a, _ in edges)
        first = sorted((a, f) for a, f in edges if by_author.get(a))
        second = [a for a, _ in sorted(edges) if len(by_author.get(a, ())) >= 2]
        for unfollowed, fid in first:
            others = [a for a in second if a != unfollowed]
            if others and size >= 3:
                candidates.append((size, user, fid, unfollowed, others[0]))
                break
    if not candidates:
        return None
    _, user, fid, unfollowed, author = min(candidates)
    pid = min(by_author[author])
    follows.change(fid, "delete", next(times), None, "delete", out.follows)
    posts.change(pid, "delete", next(times), None, "delete", out.posts)
    return Showcase(user, batch, fid, unfollowed, pid, author)


def _stale_and_unknown(table: _Table, rng: np.random.Generator, config: TimelineConfig, counts: Counter,
                       batch: int, times) -> None:
    """An old version of a few rows sent again (stale), and deletes of ids never created."""
    for key in table.sample(rng, config.stale_rate):
        old = table.history[key][0]
        taken = set(table.times[key])
        time = table.times[key][-1] - int(rng.integers(1, 600 * _US))
        while time in taken:
            time -= 1
        table.change(key, "update", time, old, "stale", counts)
    for i in range(config.unknown_deletes):
        table.change(_UNKNOWN_ID + batch * 100 + i, "delete", next(times), None, "unknown_delete", counts)


def _write(root: str, name: str, batch: int, rows: list[tuple], schema: pa.Schema, rng: np.random.Generator) -> None:
    directory = os.path.join(root, name)
    os.makedirs(directory, exist_ok=True)
    order = rng.permutation(len(rows))
    columns: list[Sequence[Any]] = list(zip(*[rows[i] for i in order])) if rows else [[] for _ in schema]
    table = pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, schema)], schema=schema)
    path = os.path.join(directory, f"part-{batch:04d}.parquet")
    pq.write_table(table, path)
    os.utime(path, (1_700_000_000 + batch, 1_700_000_000 + batch))
