"""The self-contained HTML page a timeline is shown in: no scripts, nothing fetched."""

from __future__ import annotations

from html import escape


def page(title: str, style: str, body: str) -> str:
    """A whole document: ``title``, the CSS ``style`` and the ``body`` markup."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>
{style}</style></head><body>
{body}</body></html>
"""
