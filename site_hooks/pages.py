"""MkDocs hook: pages that render offline and without script errors.

- Heading ids never start with a digit ("1. The failure" is ``sec-1-the-failure``): the
  theme's script looks headings up with ``querySelector``, which refuses such an id.
- In the API reference, the docstrings' Sphinx roles (``:class:`LeaseLost```) read as
  the name alone, not as the role's raw text.
"""

from __future__ import annotations

import re
from typing import Any

from markdown.extensions.toc import slugify

ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):(<code>)~?")


def _slug(value: str, separator: str) -> str:
    slug = slugify(value, separator)
    return f"sec{separator}{slug}" if slug[:1].isdigit() else slug


def on_config(config: Any) -> Any:
    config["mdx_configs"].setdefault("toc", {})["slugify"] = _slug
    return config


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    if not page.file.src_uri.startswith("reference/"):
        return html
    return ROLE.sub(r"\1", html)
