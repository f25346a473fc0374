"""The state of the table join stage (:mod:`streamjoin.table.stage` describes it), declared once
for the stage and its step (:mod:`streamjoin.table.step`)."""

from __future__ import annotations

from streamjoin.runtime.areas import PACKED, PACKED_VALUE, Area, StateLayout

__all__ = ["LAYOUT", "HELD", "SIDE", "KEY_AREA_PREFIX"]

#: Stage 2's state; its version is the definition's ``layout``.
LAYOUT = StateLayout("table join stage", 1, (
    Area("held", b"\x00meta", (), PACKED_VALUE),
    Area("left", b"L", (("join key, primary key", PACKED),), PACKED_VALUE),
    Area("right", b"R", (("join key, primary key", PACKED),), PACKED_VALUE),
))
HELD = LAYOUT["held"]
SIDE = {"left": LAYOUT["left"], "right": LAYOUT["right"]}
#: Where a side's key-stage areas live when its key step runs inside this stage's store
#: (:mod:`streamjoin.table.fused`): before the key stage's own prefixes.
KEY_AREA_PREFIX = {"left": b"l", "right": b"r"}
