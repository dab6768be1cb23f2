"""Numbers as a page prints them: shares as signed percentages, intervals in brackets. Pages,
chapter tables and glued prose share these (no floor imports another for them)."""

from __future__ import annotations


def pct(x, digits: int = 1, sign: bool = True) -> str:
    """0.0123 → '+1.2 %' (None → 'n/a')."""
    if x is None:
        return "n/a"
    return f"{100 * x:{'+' if sign else ''}.{digits}f} %"


def interval(lo, hi, digits: int = 1) -> str:
    """[lo, hi] as percentages."""
    if lo is None or hi is None:
        return "[n/a]"
    return f"[{100 * lo:+.{digits}f}, {100 * hi:+.{digits}f}] %"
