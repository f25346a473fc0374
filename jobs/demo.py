"""``streamjoin demo``: the main demonstration job.

Until the first join lands this demonstrates the state stores: it writes and reads the same
versioned state through every backend and shows that they agree.
"""

from __future__ import annotations

import argparse
import tempfile

from statestore import destroy_store, open_store
from statestore.codecs import encode_timestamp, pack

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the demonstration job", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--keys", type=int, default=10_000, help="keys to write (default 10000)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    backends = ("memory", "lmdb", "rocksdb")
    digests = {}
    with tempfile.TemporaryDirectory(prefix="streamjoin-demo-") as root:
        for kind in backends:
            path = f"{root}/{kind}"
            with open_store(kind, path) as store:
                for version in range(3):
                    puts = [
                        (pack(f"user{i % 97}", -i) + encode_timestamp(i * 1000), b"v%d" % version)
                        for i in range(version, args.keys, 3)
                    ]
                    store.write(puts=puts, version=version)
                store.write(delete_ranges=[(pack("user1"), pack("user2"))], version=3)
                entries = list(store.scan())
                digests[kind] = hash(tuple(entries))
                print(f"{kind:8s} version={store.version} entries={len(entries):>7,d} "
                      f"first={entries[0][0].hex()[:24]}…")
            destroy_store(kind, path)
    agree = len(set(digests.values())) == 1
    print("all backends hold the same state" if agree else "BACKENDS DISAGREE")
    return 0 if agree else 1
