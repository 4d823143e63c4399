"""Argument types shared by the subcommands' parsers."""

from __future__ import annotations


def positive(text: str) -> int:
    """An integer >= 1 (argparse reports the ValueError as an invalid value)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value
