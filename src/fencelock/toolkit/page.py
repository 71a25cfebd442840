"""The self-contained HTML page a timeline is shown in: no scripts, nothing fetched."""

from __future__ import annotations

from html import escape

MIN_PICTURE_WIDTH = 880  # px: the timelines' smallest text stays about 8 px or more


# On a narrow screen (a phone) a picture keeps a readable width and scrolls sideways
# inside its own box, and so does a wide table; the page itself never does.
NARROW = f"""figure {{ overflow-x: auto; }}
figure > svg {{ min-width: {MIN_PICTURE_WIDTH}px; }}
@media (max-width: 700px) {{ table {{ display: block; max-width: 100%; overflow-x: auto; }} }}
"""


def page(title: str, style: str, body: str) -> str:
    """A whole document: ``title``, the CSS ``style`` and the ``body`` markup."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>
{style}{NARROW}</style></head><body>
{body}</body></html>
"""
