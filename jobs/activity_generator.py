"""A seeded generator of the activity-enrichment job's inputs: the same config gives the same files.

Under ``root`` it writes:

* ``events/part-NNNN.parquet``: activity events (``event_id, user_id, ts, action``), one file per
  micro-batch, file ``b`` holding the events of hour ``b``; a few are held back two files and so
  arrive after the event watermark has passed them (late). Every profile change made by the user
  also logs an event a few seconds after it (``upgrade``, ``downgrade``, ``change_country``,
  ``sign_up``, ``close_account``), so each change has an event just after it.
* ``profile_changes/part-NNNN.parquet``: the profiles' change feed as a **plain change table**
  (``user_id, op, changed_at, plan, country``; ``op`` in ``insert``/``update``/``delete``/
  ``heartbeat``; an update carries the whole new row). Each file ends with a heartbeat row (null
  key) at the time the feed has reached. The feed's position against the activity varies, as a
  CDC connector's does: after an even file it is :data:`AHEAD` ahead of the activity files, after
  an odd file :data:`BEHIND` behind, so the changes of the last minutes of an odd hour reach the
  job one micro-batch after the events they precede. Two heartbeat-only files follow the last
  hour, so the table watermark passes every event. A few bad rows (an unknown op, a null key, a
  null change time) show the dead-letter output.
* ``profiles_snapshot.parquet``: the profiles at the start (``user_id, changed_at, plan,
  country``), for the join's ``bootstrap``. Some users are not in it: they sign up later.

Files get increasing modification times, the order Spark's file source reads them in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["ActivityConfig", "write_activity", "DELAY", "AHEAD", "BEHIND", "HOUR", "PLANS", "EVENT_SCHEMA",
           "CHANGE_SCHEMA", "SNAPSHOT_SCHEMA"]

_US = 1_000_000
HOUR = timedelta(hours=1)
#: The join's watermark delay: a change may reach the job this much behind the feed's newest time.
DELAY = timedelta(minutes=10)
#: How far the change feed is ahead of the activity after an even file, and behind after an odd one.
AHEAD, BEHIND = timedelta(minutes=30), timedelta(minutes=15)
PLANS = ("free", "plus", "pro")
_COUNTRIES = ("DE", "FR", "US", "GB", "ES", "IT", "NL", "PL", "SE", "BR", "JP", "IN")
_ACTIONS = ("view", "search", "click", "add_to_cart", "purchase")
_ACTION_WEIGHTS = (0.5, 0.2, 0.15, 0.1, 0.05)

EVENT_SCHEMA = pa.schema([("event_id", pa.int64()), ("user_id", pa.int64()), ("ts", pa.timestamp("us", "UTC")),
                          ("action", pa.string())])
CHANGE_SCHEMA = pa.schema([("user_id", pa.int64()), ("op", pa.string()), ("changed_at", pa.timestamp("us", "UTC")),
                           ("plan", pa.string()), ("country", pa.string())])
SNAPSHOT_SCHEMA = pa.schema([("user_id", pa.int64()), ("changed_at", pa.timestamp("us", "UTC")),
                             ("plan", pa.string()), ("country", pa.string())])


@dataclass(frozen=True)
class ActivityConfig:
    """Sizes and shapes of the activity-enrichment inputs."""

    events: int = 20_000               # activity events besides those logged by profile changes
    users: int = 500
    batches: int = 4                   # hours of activity, one events file each
    seed: int = 11
    changes_per_user_hour: float = 0.3
    new_user_share: float = 0.05       # users absent from the snapshot, who sign up during the run
    unknown_user_share: float = 0.02   # events of user ids that never have a profile
    late_event_share: float = 0.001    # events held back two files: late, set aside by the join
    start_us: int = 1_767_225_600 * _US   # 2026-01-01T00:00:00Z

    def heartbeats(self) -> np.ndarray:
        """The change time each change file's heartbeat carries (where the feed has reached)."""
        hour, ahead, behind = _us(HOUR), _us(AHEAD), _us(BEHIND)
        ends = [self.start_us + (f + 1) * hour + (ahead if f % 2 == 0 else -behind) for f in range(self.batches)]
        last = self.start_us + self.batches * hour + ahead
        return np.array(ends + [max(ends[-1], last), last + hour], dtype=np.int64)


def write_activity(root: str, config: ActivityConfig = ActivityConfig()) -> dict[str, int]:
    """Write the job's inputs under ``root`` (see module); return counts of what was written."""
    rng = np.random.default_rng(config.seed)
    snapshot, profiles = _snapshot(config, rng)
    changes, profile_events = _changes(config, rng, profiles)
    events = _events(config, rng, profile_events)
    os.makedirs(root, exist_ok=True)
    pq.write_table(snapshot, os.path.join(root, "profiles_snapshot.parquet"))
    held = _write_events(os.path.join(root, "events"), events, config, rng)
    bad = _write_changes(os.path.join(root, "profile_changes"), changes, config, rng)
    return {"events": events.num_rows, "profile_events": profile_events.num_rows, "late_events": held,
            "changes": changes.num_rows, "bad_changes": bad, "snapshot_rows": snapshot.num_rows,
            "event_files": config.batches, "change_files": config.batches + 2}


def _us(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)


def _snapshot(config: ActivityConfig, rng: np.random.Generator) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
    """The profiles at the start, and the same as {user: (plan, country)}."""
    n = config.users
    present = rng.random(n) >= config.new_user_share
    plans = rng.choice(len(PLANS), n, p=(0.6, 0.25, 0.15))
    countries = rng.integers(0, len(_COUNTRIES), n)
    signed_up = config.start_us - rng.integers(1, 365 * 86_400, n) * _US
    users = np.nonzero(present)[0]
    profiles = {int(u): (PLANS[plans[u]], _COUNTRIES[countries[u]]) for u in users}
    table = pa.table({
        "user_id": pa.array(users.astype(np.int64)),
        "changed_at": pa.array(signed_up[users], pa.timestamp("us", "UTC")),
        "plan": pa.array([profiles[int(u)][0] for u in users], pa.string()),
        "country": pa.array([profiles[int(u)][1] for u in users], pa.string()),
    }, schema=SNAPSHOT_SCHEMA)
    return table, profiles


def _changes(config: ActivityConfig, rng: np.random.Generator,
             profiles: dict[int, tuple[str, str]]) -> tuple[pa.Table, pa.Table]:
    """The profile changes in time order (distinct times), and the event each one logs."""
    span = config.batches * _us(HOUR) - 2 * 60 * _US    # room for the logged event after the last change
    n = int(rng.poisson(config.changes_per_user_hour * config.users * config.batches))
    times = config.start_us + np.sort(rng.integers(0, span - n, n)) + np.arange(n)   # strictly increasing
    who, kind, pick = rng.integers(0, config.users, n), rng.random(n), rng.random(n)
    rows, logged = [], []
    for t, u, k, p in zip(times.tolist(), who.tolist(), kind.tolist(), pick.tolist()):
        current = profiles.get(u)
        if current is None:
            op, new, action = "insert", ("free", _COUNTRIES[int(p * len(_COUNTRIES))]), "sign_up"
        elif k < 0.06:
            op, new, action = "delete", None, "close_account"
        elif k < 0.6:
            level = PLANS.index(current[0])
            up = level == 0 or (level < len(PLANS) - 1 and p < 0.7)
            op, new = "update", (PLANS[level + 1 if up else level - 1], current[1])
            action = "upgrade" if up else "downgrade"
        else:
            moved = [c for c in _COUNTRIES if c != current[1]]
            op, new, action = "update", (current[0], moved[int(p * len(moved))]), "change_country"
        if new is None:
            profiles.pop(u, None)
        else:
            profiles[u] = new
        rows.append((u, op, t, *(new or (None, None))))
        logged.append((u, t + int(rng.integers(1, 60)) * _US, action))
    changes = pa.table({name: pa.array([r[i] for r in rows], CHANGE_SCHEMA.field(name).type if i != 2 else pa.int64())
                        for i, name in enumerate(CHANGE_SCHEMA.names)}).cast(CHANGE_SCHEMA)
    events = pa.table({"user_id": pa.array([r[0] for r in logged], pa.int64()),
                       "ts": pa.array([r[1] for r in logged], pa.timestamp("us", "UTC")),
                       "action": pa.array([r[2] for r in logged], pa.string())})
    return changes, events


def _events(config: ActivityConfig, rng: np.random.Generator, profile_events: pa.Table) -> pa.Table:
    """Random activity plus the events profile changes logged, numbered in time order."""
    n = config.events
    unknown = max(3, config.users // 50)
    known = rng.random(n) >= config.unknown_user_share
    users = np.where(known, rng.integers(0, config.users, n), config.users + rng.integers(0, unknown, n))
    times = config.start_us + rng.integers(0, config.batches * _us(HOUR), n)
    actions = np.array(_ACTIONS)[rng.choice(len(_ACTIONS), n, p=_ACTION_WEIGHTS)]
    random = pa.table({"user_id": pa.array(users.astype(np.int64)),
                       "ts": pa.array(times, pa.timestamp("us", "UTC")),
                       "action": pa.array(actions.tolist(), pa.string())})
    table = pa.concat_tables([random, profile_events])
    table = table.sort_by([("ts", "ascending"), ("user_id", "ascending"), ("action", "ascending")])
    return table.add_column(0, "event_id", pa.array(np.arange(table.num_rows, dtype=np.int64))).cast(EVENT_SCHEMA)


def _write_events(directory: str, events: pa.Table, config: ActivityConfig, rng: np.random.Generator) -> int:
    """One file per hour; a few events held back two files (late). Return the held-back count."""
    hour = (events.column("ts").cast(pa.int64()).to_numpy() - config.start_us) // _us(HOUR)
    held = (rng.random(events.num_rows) < config.late_event_share) & (hour + 2 < config.batches)
    files = np.where(held, hour + 2, hour)
    _write_files(directory, events, files, config.batches, config, rng)
    return int(held.sum())


def _write_changes(directory: str, changes: pa.Table, config: ActivityConfig, rng: np.random.Generator) -> int:
    """Each change in the first file whose heartbeat is after it; heartbeats; bad rows. Return bad rows."""
    beats = config.heartbeats()
    times = changes.column("changed_at").cast(pa.int64()).to_numpy()
    files = np.searchsorted(beats, times, side="right")
    n_files = len(beats)
    heartbeat_rows = pa.table({"user_id": pa.nulls(n_files, pa.int64()), "op": pa.array(["heartbeat"] * n_files),
                               "changed_at": pa.array(beats, pa.timestamp("us", "UTC")),
                               "plan": pa.nulls(n_files, pa.string()), "country": pa.nulls(n_files, pa.string())},
                              schema=CHANGE_SCHEMA)
    # a few dead letters, each inside the time range of the file it is in
    f = min(1, n_files - 1)
    t = int(beats[f]) - 60 * _US
    bad = pa.table({"user_id": pa.array([0, None, 1], pa.int64()), "op": ["merge", "update", "update"],
                    "changed_at": pa.array([t, t, None], pa.int64()), "plan": ["pro", "pro", "plus"],
                    "country": ["DE", "FR", "US"]}).cast(CHANGE_SCHEMA)
    table = pa.concat_tables([changes, bad, heartbeat_rows])
    files = np.concatenate([files, np.full(bad.num_rows, f), np.arange(n_files)])
    _write_files(directory, table, files, n_files, config, rng, last=heartbeat_rows.num_rows)
    return bad.num_rows


def _write_files(directory: str, table: pa.Table, files: np.ndarray, n_files: int, config: ActivityConfig,
                 rng: np.random.Generator, last: int = 0) -> None:
    """Rows ``files == b`` to ``part-b``, shuffled (the final ``last`` rows of ``table`` stay last)."""
    os.makedirs(directory, exist_ok=True)
    tail = np.zeros(table.num_rows, dtype=bool)
    if last:
        tail[-last:] = True
    for b in range(n_files):
        body = np.nonzero((files == b) & ~tail)[0]
        rows = np.concatenate([body[rng.permutation(len(body))], np.nonzero((files == b) & tail)[0]])
        path = os.path.join(directory, f"part-{b:04d}.parquet")
        pq.write_table(table.take(pa.array(rows, pa.int64())), path)
        # Spark's file source takes files oldest first: give them distinct, increasing ages
        stamp = config.start_us // _US + b
        os.utime(path, (stamp, stamp))
