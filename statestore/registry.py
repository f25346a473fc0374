"""Names and import paths of store backends: how ``open_store`` finds one.

Built-in kinds are ``"arranged"`` (the default, :data:`DEFAULT_KIND`), ``"rocksdb"`` and ``"lmdb"``
(the arranged store with its manifest and runs in RocksDB or LMDB,
``streamjoin.statestore.hosted``), ``"rocksdb-kv"`` and ``"lmdb-kv"`` (one RocksDB or LMDB entry
per state entry) and ``"memory"``; their modules are imported only when first used. A user's backend plugs in by
``register_backend(name, factory)`` or by passing ``"package.module:Class"`` as the kind. A factory
is called as ``factory(path, **options)`` and must return a ``streamjoin.statestore.base.Store``.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any, Callable, Mapping

from streamjoin.statestore.base import Store
from streamjoin.statestore.errors import BackendNotFoundError, StoreArgumentError

__all__ = ["open_store", "register_backend", "destroy_store", "backend_names", "resolve_backend", "check_store_options"]

StoreFactory = Callable[..., Store]

_BUILTIN = {
    "rocksdb": "streamjoin.statestore.hosted:RocksDBArrangedStore",
    "lmdb": "streamjoin.statestore.hosted:LMDBArrangedStore",
    "rocksdb-kv": "streamjoin.statestore.rocksdb:RocksDBStore",
    "lmdb-kv": "streamjoin.statestore.lmdb:LMDBStore",
    "memory": "streamjoin.statestore.memory:MemoryStore",
    "arranged": "streamjoin.statestore.arranged:ArrangedStore",
}
_REGISTERED: dict[str, StoreFactory] = {}

#: The kind the joins, the view sink and the tools use when none is given.
DEFAULT_KIND = "arranged"


def register_backend(name: str, factory: StoreFactory) -> None:
    """Make ``open_store(name, ...)`` call ``factory(path, **options)``. Replaces an earlier one."""
    if not name or ":" in name:
        raise ValueError(f"backend name {name!r} must be non-empty and contain no ':'")
    _REGISTERED[name] = factory


def backend_names() -> list[str]:
    """Kinds that ``open_store`` knows by name (built-in and registered)."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def resolve_backend(kind: str) -> StoreFactory:
    """The factory for ``kind``: a registered name, a built-in name, or ``package.module:Class``.

    Raises ``StoreArgumentError`` when ``kind`` is not a str, ``BackendNotFoundError``
    when it names nothing importable.
    """
    if not isinstance(kind, str):
        raise StoreArgumentError(
            f"store kind={kind!r} ({type(kind).__name__}): kind must be a str, one of "
            f"{backend_names()} or 'package.module:Class' for your own backend"
        )
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    target = _BUILTIN.get(kind, kind)
    if ":" not in target:
        raise BackendNotFoundError(
            f"unknown store kind {kind!r}; use one of {backend_names()}, "
            "or 'package.module:Class' for your own backend"
        )
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendNotFoundError(f"store kind {kind!r}: cannot import {module_name!r} ({exc})") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise BackendNotFoundError(f"store kind {kind!r}: {module_name} has no {attr!r}") from exc


def open_store(kind: str = DEFAULT_KIND, path: str | os.PathLike[str] = "", **options: Any) -> Store:
    """Open (creating if needed) the store of ``kind`` at ``path``.

    Raises ``BackendNotFoundError`` for an unknown kind, ``StoreArgumentError`` for a
    kind, path or option it cannot use, ``StoreLockedError`` when another handle holds the
    path, ``StoreCorruptError`` when the path holds something unreadable and
    ``StoreIOError`` when the operating system refuses the files (disk full, no permission).
    """
    factory = resolve_backend(kind)
    path = _check_path("open_store", kind, path)
    _check_option_names(kind, factory, options)
    store = factory(path, **options)
    if not isinstance(store, Store):
        raise BackendNotFoundError(
            f"store kind {kind!r} returned {type(store).__name__}, not a streamjoin.statestore.Store subclass"
        )
    return store


def check_store_options(kind: str, options: Mapping[str, Any]) -> None:
    """Refuse now what ``open_store(kind, path, **options)`` would refuse of ``options``, without
    opening a store: ``BackendNotFoundError`` for an unknown kind, ``StoreArgumentError`` for an
    option the kind does not take or a bad value (the backend's ``Store.check_options``)."""
    factory = resolve_backend(kind)
    _check_option_names(kind, factory, dict(options))
    check = getattr(factory, "check_options", None)
    if check is not None:
        check(options)


def destroy_store(kind: str, path: str | os.PathLike[str]) -> None:
    """Remove the files of the store of ``kind`` at ``path`` (it must be closed; one this process
    keeps warm, ``streamjoin.statestore.warm``, is closed first)."""
    from streamjoin.statestore import warm

    factory = resolve_backend(kind)
    destroy = getattr(factory, "destroy", None) or Store.destroy
    path = _check_path("destroy_store", kind, path)
    warm.evict(path)
    destroy(path)


def _check_path(caller: str, kind: str, path: object) -> str:
    """``path`` as a str; refuses an empty path or one that is not a str or ``os.PathLike``."""
    if isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if isinstance(path, str) and path:
            return path
    raise StoreArgumentError(
        f"{caller}({kind!r}, path={path!r}): path must be a non-empty str or os.PathLike "
        "(a directory for disk backends, a name for memory)"
    )


def _option_names(factory: StoreFactory) -> list[str] | None:
    """The options ``factory`` takes by name after the path; None when it has no signature to read
    or takes ``**options`` (it then checks its own)."""
    try:
        parameters = list(inspect.signature(factory).parameters.values())[1:]  # after the path
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _check_option_names(kind: str, factory: StoreFactory, options: dict[str, Any]) -> None:
    """Refuse options the backend's factory does not take, naming them and the ones it takes."""
    known = _option_names(factory)
    unknown = [] if known is None else sorted(set(options) - set(known))
    if unknown:
        raise StoreArgumentError(
            f"open_store({kind!r}, ..., {', '.join(unknown)}=...): store kind {kind!r} has no option "
            f"{', '.join(map(repr, unknown))}; its options are {known or 'none'}{_elsewhere(kind, unknown)}"
        )


def _elsewhere(kind: str, unknown: list[str]) -> str:
    """A hint naming the first built-in kind that takes ``unknown`` options (a join that names no
    store has the default kind, whose options differ from RocksDB's and LMDB's)."""
    taker = next((other for other in sorted(set(_BUILTIN) - {kind})
                  if set(unknown) <= set(_option_names(resolve_backend(other)) or ())), None)
    if taker is None:
        return ""
    default = f" ({kind!r} is the default store kind)" if kind == DEFAULT_KIND else ""
    return f"; store={taker!r} takes {'it' if len(unknown) == 1 else 'them'}{default}"
