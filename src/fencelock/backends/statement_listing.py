"""The SQL backends' statements as a DBA reads them (``fencelock init --sql``)."""

from __future__ import annotations

from collections.abc import Iterable


def listing(statements: Iterable[tuple[str, str]]) -> str:
    """``(purpose, statement)`` pairs as one commented SQL text."""
    return "\n\n".join(f"-- {purpose}\n{sql};" for purpose, sql in statements) + "\n"
