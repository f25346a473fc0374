"""PostgreSQL log sequence numbers: the text form ``"16/B374D848"`` and the integer it stands for."""

from __future__ import annotations

__all__ = ["parse_lsn", "format_lsn"]


def parse_lsn(text: str) -> int:
    """The integer of an LSN written ``"X/Y"`` (two hexadecimal halves). Raises ValueError."""
    high, sep, low = text.partition("/")
    if not sep or not high or not low:
        raise ValueError(f"not an LSN: {text!r} (expected two hexadecimal numbers such as '0/16B3748')")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(value: int) -> str:
    """The ``"X/Y"`` form of an integer LSN; ``format_lsn(parse_lsn(s))`` is ``s`` in upper case."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"an LSN is an unsigned 64-bit integer, not {value}")
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"
