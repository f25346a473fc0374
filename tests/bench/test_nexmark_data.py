"""The Nexmark generator (no Spark, no timing): seeded, Nexmark's 1:3:46 proportions, references
that exist when they are made, micro-batches that split the streams by time, and the queries'
expected counts checked against a plain Python join."""

from __future__ import annotations

import numpy as np

from streamjoin.bench.nexmark_data import EPOCH_US, STEP_US, generate
from streamjoin.bench.nexmark_queries import QUERIES, WINDOW_S


def test_nexmark_generate_is_seeded():
    first, again, other = generate(5_000, 3, seed=11), generate(5_000, 3, seed=11), generate(5_000, 3, seed=12)
    for name in ("persons", "auctions", "bids"):
        assert getattr(first, name).equals(getattr(again, name))
    assert not first.bids.equals(other.bids) and not first.auctions.equals(other.auctions)


def test_nexmark_generate_has_the_proportions_1_3_46():
    data = generate(50 * 200, 4)
    assert (data.persons.num_rows, data.auctions.num_rows, data.bids.num_rows) == (200, 600, 9_200)
    ragged = generate(50 * 10 + 7)   # the 11th group is cut after its person, auctions and 3 bids
    assert (ragged.persons.num_rows, ragged.auctions.num_rows, ragged.bids.num_rows) == (11, 33, 463)


def test_nexmark_generate_references_exist_and_bids_fall_in_their_auction():
    data = generate(20_000, 5)
    p_time = data.persons.column("date_time").cast("int64").to_numpy()
    a_time = data.auctions.column("date_time").cast("int64").to_numpy()
    a_expires = data.auctions.column("expires").cast("int64").to_numpy()
    seller = data.auctions.column("seller").to_numpy()
    assert (p_time[seller] < a_time).all()
    auction = data.bids.column("auction").to_numpy()
    b_time = data.bids.column("date_time").cast("int64").to_numpy()
    assert ((a_time[auction] < b_time) & (b_time <= a_expires[auction])).all()
    assert (data.persons.column("id").to_numpy() == np.arange(data.persons.num_rows)).all()


def test_nexmark_batches_split_every_stream_by_time():
    data = generate(10_000, 4)
    end = EPOCH_US + 10_000 * STEP_US
    for b in range(4):
        low, high = EPOCH_US + (end - EPOCH_US) * b // 4, EPOCH_US + (end - EPOCH_US) * (b + 1) // 4
        for name in ("persons", "auctions", "bids"):
            times = data.batch(name, b).column("date_time").cast("int64").to_numpy()
            assert len(times) and times.min() >= low and times.max() < high
    assert sum(data.batch("bids", b).num_rows for b in range(4)) == data.bids.num_rows


def test_nexmark_expected_counts_match_a_python_join():
    data = generate(30_000, 2, seed=5)
    persons = {p["id"]: p for p in data.persons.to_pylist()}
    auctions = {a["id"]: a for a in data.auctions.to_pylist()}
    q3 = sum(1 for a in auctions.values() if a["category"] == 10 and persons[a["seller"]]["state"] in ("OR", "ID", "CA"))
    q20 = sum(1 for b in data.bids.to_pylist() if auctions[b["auction"]]["category"] == 10)
    q8 = sum(1 for a in auctions.values()
             if (a["date_time"] - persons[a["seller"]]["date_time"]).total_seconds() <= WINDOW_S)
    assert (QUERIES["q3"].expected(data), QUERIES["q20"].expected(data), QUERIES["q8w"].expected(data)) == (q3, q20, q8)
    assert 0 < q8 < data.auctions.num_rows   # the window leaves some auctions out
