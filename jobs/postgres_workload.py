"""The shop whose changes the PostgreSQL job joins: its tables, and a seeded workload of transactions.

Tables: ``users`` (tier changes), ``products`` (price changes, deletes), ``orders`` (inserted with
the user's tier as PostgreSQL saw it, then quantity changes, moves to another product, moves to
another order id, deletes), and the two derived tables the job writes back: ``order_lines``
(orders x products, the view) and ``orders_enriched`` (each order with its user as of its commit).
An order is inserted in a transaction of its own that reads its user's tier ``FOR SHARE``, so the
tier it records is the user's row as of the order's commit: what the as-of join must find.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCHEMA", "Workload", "VIEW_DIFFERENCES", "ENRICHED_CHECK"]

SCHEMA = """
CREATE TABLE users (user_id bigint PRIMARY KEY, name text NOT NULL, tier text NOT NULL);
CREATE TABLE products (product_id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
CREATE TABLE orders (order_id bigint PRIMARY KEY, user_id bigint NOT NULL, product_id bigint NOT NULL,
                     quantity integer NOT NULL, user_tier text NOT NULL);
CREATE TABLE order_lines (order_id bigint, product_id bigint, quantity integer, product_name text,
                          price numeric(10,2), PRIMARY KEY (order_id, product_id));
CREATE TABLE orders_enriched (order_id bigint PRIMARY KEY, user_id bigint, ordered_at timestamptz,
                              user_tier text, tier text);
"""

#: The rows of orders JOIN products that order_lines lacks, plus those it has in excess.
VIEW_DIFFERENCES = """
WITH truth AS (SELECT o.order_id, o.product_id, o.quantity, p.name AS product_name, p.price
               FROM orders o JOIN products p USING (product_id)),
     derived AS (SELECT order_id, product_id, quantity, product_name, price FROM order_lines)
SELECT (SELECT count(*) FROM (SELECT * FROM truth EXCEPT ALL SELECT * FROM derived) a)
     + (SELECT count(*) FROM (SELECT * FROM derived EXCEPT ALL SELECT * FROM truth) b),
       (SELECT count(*) FROM truth)
"""

#: Enriched orders, and those whose tier differs from the one recorded by PostgreSQL at the order.
ENRICHED_CHECK = "SELECT count(*), count(*) FILTER (WHERE tier IS DISTINCT FROM user_tier) FROM orders_enriched"

_TIERS = ("free", "plus", "pro")


@dataclass
class Workload:
    """Seeded transactions over the shop's tables; ``orders_inserted`` counts the orders created."""

    seed: int = 17
    rng: random.Random = field(init=False)
    users: list[int] = field(default_factory=list)
    products: list[int] = field(default_factory=list)
    orders: list[int] = field(default_factory=list)
    next_id: int = 1
    orders_inserted: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def seed_users(self, conn: Any, count: int) -> None:
        """Insert ``count`` users in one transaction."""
        with conn.transaction():
            for _ in range(count):
                self._new_user(conn)

    def seed_products(self, conn: Any, count: int) -> None:
        """Insert ``count`` products in one transaction."""
        with conn.transaction():
            for _ in range(count):
                self._new_product(conn)

    def run(self, conn: Any, transactions: int) -> None:
        """Run ``transactions`` transactions: a third insert orders, the rest mix 1-3 other changes."""
        for _ in range(transactions):
            with conn.transaction():
                if self.rng.random() < 0.35 or not self.orders:
                    for _ in range(self.rng.randint(1, 2)):
                        self._new_order(conn)
                else:
                    for _ in range(self.rng.randint(1, 3)):
                        self._change(conn)

    def _change(self, conn: Any) -> None:
        ops = (self._user_tier, self._new_user, self._new_product, self._product_price, self._product_delete,
               self._order_quantity, self._order_product, self._order_id, self._order_delete)
        weights = (18, 5, 5, 12, 2, 16, 14, 8, 10)
        self.rng.choices(ops, weights)[0](conn)

    def _new_user(self, conn: Any) -> None:
        uid = self._id()
        conn.execute("INSERT INTO users VALUES (%s, %s, %s)", (uid, f"user-{uid}", self.rng.choice(_TIERS)))
        self.users.append(uid)

    def _new_product(self, conn: Any) -> None:
        pid = self._id()
        price = f"{self.rng.randint(100, 99_999) / 100:.2f}"
        conn.execute("INSERT INTO products VALUES (%s, %s, %s)", (pid, f"product-{pid}", price))
        self.products.append(pid)

    def _new_order(self, conn: Any) -> None:
        if not self.users or not self.products:
            return
        uid, pid = self.rng.choice(self.users), self.rng.choice(self.products)
        tier = conn.execute("SELECT tier FROM users WHERE user_id = %s FOR SHARE", (uid,)).fetchone()[0]
        oid = self._id()
        conn.execute("INSERT INTO orders VALUES (%s, %s, %s, %s, %s)", (oid, uid, pid, self.rng.randint(1, 5), tier))
        self.orders.append(oid)
        self.orders_inserted += 1

    def _user_tier(self, conn: Any) -> None:
        if self.users:
            conn.execute("UPDATE users SET tier = %s WHERE user_id = %s",
                         (self.rng.choice(_TIERS), self.rng.choice(self.users)))

    def _product_price(self, conn: Any) -> None:
        if self.products:
            conn.execute("UPDATE products SET price = price + 1 WHERE product_id = %s", (self.rng.choice(self.products),))

    def _product_delete(self, conn: Any) -> None:
        if len(self.products) > 3:
            pid = self.products.pop(self.rng.randrange(len(self.products)))
            conn.execute("DELETE FROM products WHERE product_id = %s", (pid,))

    def _order_quantity(self, conn: Any) -> None:
        if self.orders:
            conn.execute("UPDATE orders SET quantity = quantity + 1 WHERE order_id = %s", (self.rng.choice(self.orders),))

    def _order_product(self, conn: Any) -> None:
        """A join-key move: the order now refers to another product."""
        if self.orders and self.products:
            conn.execute("UPDATE orders SET product_id = %s WHERE order_id = %s",
                         (self.rng.choice(self.products), self.rng.choice(self.orders)))

    def _order_id(self, conn: Any) -> None:
        """A primary-key move: the order gets a new id."""
        if self.orders:
            i = self.rng.randrange(len(self.orders))
            new = self._id()
            conn.execute("UPDATE orders SET order_id = %s WHERE order_id = %s", (new, self.orders[i]))
            self.orders[i] = new

    def _order_delete(self, conn: Any) -> None:
        if self.orders:
            oid = self.orders.pop(self.rng.randrange(len(self.orders)))
            conn.execute("DELETE FROM orders WHERE order_id = %s", (oid,))
