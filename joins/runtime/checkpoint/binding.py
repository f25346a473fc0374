"""What a checkpoint belongs to: ``streamjoin.json`` (definition, partitions, key groups, run
mode), ``query.json`` (the streaming query that writes it), ``flush.json`` (that query's
flush source) and ``evolution/<n>.json`` (each schema evolution of the join's inputs accepted
since, with the definition it made: :mod:`streamjoin.runtime.evolution`). Each is created only
if absent, so of two runs binding a checkpoint at once exactly one wins and the other is compared
with it; none is ever rewritten."""

from __future__ import annotations

import json
import uuid
from enum import Enum
from typing import Any, Mapping, Sequence

from streamjoin.errors import CheckpointDamagedError, CheckpointMismatchError
from streamjoin.kit.times import describe_durations
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.evolution import OptionRule, SchemaPlace, schema_evolution
from streamjoin.runtime.keygroups import DEFAULT_KEY_GROUPS, check_count, check_key_groups

__all__ = ["Binding", "FORMAT", "RunMode", "ROOT", "EVOLUTION", "MIGRATED_FROM", "definition_changes",
           "migration_needed"]

#: 2: progress and metrics in one commit record per partition and version (``commits/``)
FORMAT = 2
ROOT = "streamjoin.json"
#: The field of a ``streamjoin.json`` rewritten by ``streamjoin checkpoint migrate`` naming the
#: format it had (:mod:`streamjoin.runtime.migrate`): its epoch 0 is not routed by key group.
MIGRATED_FROM = "migrated_from"
#: The folder of the evolution records, ``<n>.json`` numbered from 1 (six digits).
EVOLUTION = "evolution"

#: checkpoint URI -> the query this process found it bound to (``query.json`` is never rewritten)
_BOUND: dict[str, str] = {}


class RunMode(str, Enum):
    """What writes a checkpoint: one streaming query, or batch runs (each one replaces the last)."""

    STREAMING = "streaming"
    BATCH = "batch"


class Binding:
    """Reads and writes the binding records of one checkpoint (see module)."""

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files
        #: after :meth:`bind`: the definitions the checkpoint has had, oldest first, the bound one
        #: last (what :meth:`history` would read again)
        self.bound_history: list[dict[str, Any]] = []

    @property
    def uri(self) -> str:
        return self.files.uri

    def root(self) -> dict[str, Any] | None:
        """``streamjoin.json``; None for a checkpoint never bound."""
        return self.files.read_json(ROOT)

    def bind(
        self, definition: Mapping[str, Any], partitions: int, *, mode: RunMode = RunMode.STREAMING,
        key_groups: int | None = None, places: Sequence[SchemaPlace] = (), options: Sequence[OptionRule] = (),
    ) -> dict[str, Any]:
        """Record what this checkpoint belongs to, or refuse if it belongs to something else; the
        ``streamjoin.json`` record it holds afterwards.

        A new checkpoint records ``key_groups`` (None: ``DEFAULT_KEY_GROUPS``), the fixed number of
        key groups its state is kept by, and an ``id`` of its own (:meth:`identity`); another partition count is then accepted (the caller
        starts a new partitioning, :func:`streamjoin.runtime.rescale.bind_partitions`). A checkpoint
        of an earlier format (streamjoin 0.2's, without key groups) is refused.

        Raises :class:`JoinDefinitionError` (before writing anything) unless ``partitions`` is an
        int from 1 to the key groups and ``key_groups`` (if given) an int of at least 1, and
        :class:`CheckpointMismatchError` for another format, definition or ``key_groups``,
        and for another ``mode``: a batch run never writes a streaming query's checkpoint (it would
        replace the query's state by its own version 0) and a streaming query never continues a
        batch run's (whose state has every window closed). Of concurrent first binds one wins.

        A definition that differs from the checkpoint's current one (:meth:`definition`) only in
        the columns of its inputs at ``places``, by changes the state can follow, is accepted and
        recorded as the next evolution, as is one whose ``options`` grew (a longer delay, TTL or
        retention); a column change the state cannot follow, or an option that shrank, raises
        :class:`CheckpointMismatchError` naming it (:func:`streamjoin.runtime.evolution.schema_evolution`).
        """
        mode = RunMode(mode)
        if key_groups is not None:
            check_count(key_groups, "max_partitions")
        check_count(partitions, "partitions")
        wanted = {"format": FORMAT, "definition": definition, "partitions": partitions, "mode": mode.value,
                  "key_groups": DEFAULT_KEY_GROUPS if key_groups is None else key_groups}
        found = self.root()
        if found is None:
            check_key_groups(wanted["key_groups"], partitions)   # before anything is written
            created = {**wanted, "id": uuid.uuid4().hex}
            if self.files.create_json(ROOT, created):
                self.bound_history = [json.loads(json.dumps(definition))]
                return json.loads(json.dumps(created))
            found = self.root() or {}
        if found.get("format") == 1:
            raise migration_needed(self.uri)
        if found.get("format") != FORMAT:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} has format {found.get('format')}, this streamjoin writes "
                f"{FORMAT}; use a new checkpoint location"
            )
        if key_groups is not None and found.get("key_groups") not in (None, key_groups):
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} keeps its state in {found.get('key_groups')} key groups "
                f"(max_partitions), fixed when the join was first defined; this join asks for {key_groups}: "
                "leave max_partitions out or give the recorded value, or start from a new checkpoint location"
            )
        self._check_mode(found, mode)
        self._check_definition(found, json.loads(json.dumps(definition)), places, options)
        return found

    def _check_definition(self, root: Mapping[str, Any], definition: dict[str, Any],
                          places: Sequence[SchemaPlace], options: Sequence[OptionRule]) -> None:
        """Accept ``definition`` as the checkpoint's current one, or as its next schema
        evolution (recorded here), or refuse it."""
        for _ in range(8):   # another run may record an evolution between the read and the create
            history = self.history(root, self.evolutions())
            current = history[-1]
            if current == definition:
                self.bound_history = history
                return
            evolved = schema_evolution(current, definition, places, where=self.uri, options=options)
            if evolved is None:
                changes = definition_changes(current, definition)
                raise CheckpointMismatchError(
                    f"checkpoint {self.uri} belongs to another join definition; what differs "
                    "(the checkpoint's -> this join's):\n" + "\n".join(f"  {c}" for c in changes) + "\n"
                    "A changed join needs a new checkpoint location (and its query a new Spark checkpoint); "
                    "or define the join as it was"
                )
            record = {"definition": definition, "changes": [line for c in evolved for line in c.lines()]}
            if self.files.create_json(f"{EVOLUTION}/{len(history):06d}.json", record):
                self.bound_history = [*history, definition]
                return
        raise CheckpointMismatchError(f"checkpoint {self.uri}: its schema evolutions keep changing while this join "
                                      "binds it; run one query on a checkpoint at a time")

    def evolved(self) -> bool:
        """Whether the checkpoint has an evolution record (one listing, no record read)."""
        return any(n.endswith(".json") for n in self.files.names(EVOLUTION))

    def evolutions(self) -> list[dict[str, Any]]:
        """The evolution records, oldest first (each ``{"definition", "changes"}``)."""
        names = sorted(n for n in self.files.names(EVOLUTION) if n.endswith(".json"))
        out = []
        for name in names:
            found = self.files.read_json(f"{EVOLUTION}/{name}")
            if not isinstance(found, dict) or not isinstance(found.get("definition"), dict):
                raise CheckpointDamagedError(
                    f"checkpoint {self.uri}: {EVOLUTION}/{name} is not an evolution record; restore it from a "
                    "copy of the checkpoint", path=self.files.location(f"{EVOLUTION}/{name}"))
            out.append(found)
        return out

    def history(self, root: Mapping[str, Any] | None = None,
                records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The definitions the checkpoint has had, oldest first: ``streamjoin.json``'s (``root``,
        if already read), then each evolution's (``records``, if already read); the last is the
        one its state is kept by now."""
        found = (self.root() if root is None else root) or {}
        records = self.evolutions() if records is None else records
        return [dict(found.get("definition") or {}), *(dict(r["definition"]) for r in records)]

    def definition(self, root: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The join definition the checkpoint's state is kept by now (:meth:`history`'s last)."""
        return self.history(root)[-1]

    def _check_mode(self, found: Mapping[str, Any], mode: RunMode) -> None:
        recorded = found.get("mode")
        if recorded is None:   # written before modes were recorded: a bound query means streaming
            recorded = RunMode.STREAMING.value if self.bound_query(found) is not None else None
        if recorded is None or recorded == mode.value:
            return
        if mode is RunMode.BATCH:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} holds the state of a streaming query; a batch run would "
                "replace that state with its own and the query could not continue. Give the batch "
                "run its own checkpoint location, or none (a batch run needs no checkpoint)"
            )
        raise CheckpointMismatchError(
            f"checkpoint {self.uri} was written by a batch run, whose state ends with every window "
            "closed; a streaming query cannot continue from it. Use a new checkpoint location for "
            "the streaming query"
        )

    @staticmethod
    def identity(root: Mapping[str, Any]) -> str | None:
        """The id ``streamjoin.json`` was created with (None: a checkpoint older than ids). A
        checkpoint deleted and made again at the same location gets another id, so local stores
        of the deleted one are known as not its own (they are keyed by location) and rebuilt; the
        id names the checkpoint and never reaches a join's rows."""
        found = root.get("id")
        return found if isinstance(found, str) else None

    def bound_query(self, root: Mapping[str, Any] | None = None) -> str | None:
        """The id of the streaming query this checkpoint belongs to; None if none has run.
        ``root``: ``streamjoin.json`` if already read (older versions kept the id there)."""
        found = self.files.read_json("query.json")
        if found is not None:
            return found.get("query_id")
        legacy = (self.root() if root is None else root) or {}
        return legacy.get("query_id")

    def check_query(self, query_id: str | None, root: Mapping[str, Any] | None = None) -> None:
        """Refuse a checkpoint bound to another streaming query; bind it to ``query_id`` if free.
        ``root``: ``streamjoin.json`` if already read.

        ``query_id`` None (a batch task) is refused on a checkpoint bound to a query. Binding is
        create-if-absent: of queries starting at once, exactly one binds it, the others are refused.
        """
        if query_id is not None and _BOUND.get(self.uri) == query_id:
            return   # a binding is never rewritten: checked once per process
        bound = self.bound_query(root)
        if bound is None and query_id is not None:
            if self.files.create_json("query.json", {"query_id": query_id}):
                _BOUND[self.uri] = query_id
                return
            bound = self.bound_query()
        if bound is not None and bound == query_id:
            _BOUND[self.uri] = query_id
        if bound is None or bound == query_id:
            return
        if query_id is None:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} belongs to streaming query {bound}; a batch run must not "
                "write it. Give the batch run its own checkpoint location, or none"
            )
        raise CheckpointMismatchError(
            f"checkpoint {self.uri} belongs to streaming query {bound}, not {query_id}; each "
            "query needs its own join checkpoint (restart a query from its own Spark checkpoint "
            "to keep its id)"
        )

    def claim_flush(self, owner: str) -> str:
        """Record ``owner`` (a streaming query's flush source, see :mod:`streamjoin.spark.flush`)
        as the one writing this checkpoint unless another is recorded; the owner recorded.
        Create-if-absent, like ``query.json``: of two sources claiming at once exactly one wins."""
        found = self.files.read_json("flush.json")
        if found is None:
            if self.files.create_json("flush.json", {"owner": owner}):
                return owner
            found = self.files.read_json("flush.json") or {}
        return str(found.get("owner"))

    def key_groups(self, root: Mapping[str, Any] | None = None) -> int:
        """The number of key groups state is kept by (recorded by :meth:`bind`); ``root``:
        ``streamjoin.json`` if already read."""
        found = (self.root() if root is None else root) or {}
        if not isinstance(found.get("key_groups"), int):
            raise CheckpointDamagedError(
                f"checkpoint {self.uri}: {ROOT} records no key groups; restore it from a copy of "
                "the checkpoint, or start the join from a new checkpoint location",
                path=self.files.location(ROOT))
        return int(found["key_groups"])


def migration_needed(uri: str) -> CheckpointMismatchError:
    """The error for checkpoint ``uri`` of format 1 (streamjoin 0.2), saying how to migrate it:
    ``streamjoin checkpoint migrate`` on the join's location (for a stage of a 0.2 table-table
    join, its only join of several stages, the folder above)."""
    from streamjoin.runtime.plan import UNRECORDED_STAGES  # (plan reads this module)

    parent, _, name = uri.rstrip("/").rpartition("/")
    location = uri
    if name in UNRECORDED_STAGES and parent:
        above = CheckpointFiles(parent)
        if all(above.exists(f"{s}/{ROOT}") for s in UNRECORDED_STAGES):
            location = parent
    return CheckpointMismatchError(
        f"checkpoint {uri} was written by streamjoin 0.2 (format 1); this streamjoin reads format {FORMAT}. "
        f"Stop the query and migrate the checkpoint, keeping its state: `streamjoin checkpoint migrate {location}` "
        "(the query then restarts on it and on its Spark checkpoint as before)")


def definition_changes(old: Any, new: Any, path: str = "") -> list[str]:
    """The options that differ between two join definitions (as ``streamjoin.json`` records them),
    one line each, ``name: old -> new``: nested options by dotted name, durations (``*_us``) in
    words (``upper: 30 minutes -> 20 minutes``), an option only one has as ``(none)``."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        lines = []
        for key in list(old) + [k for k in new if k not in old]:
            name = f"{path}.{key}" if path else str(key)
            if key not in new or key not in old or old[key] != new[key]:
                lines += definition_changes(old.get(key, _NONE), new.get(key, _NONE), name)
        return lines
    if old == new:
        return []
    unit = path.endswith("_us")
    name = path[:-3] if unit else path
    return [f"{name or 'definition'}: {_option(old, unit)} -> {_option(new, unit)}"]


_NONE = object()


def _option(value: Any, duration: bool) -> str:
    if value is _NONE:
        return "(none)"
    return describe_durations(value) if duration else json.dumps(value, sort_keys=True)
