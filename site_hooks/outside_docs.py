"""MkDocs hook: the pages that live beside docs/ (bench/README.md, the runnable
examples) join the site, and the docs' relative links to them (written to work on a
repository browser too) are pointed at their place in the site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = (
    "bench/README.md",
    "bench/metrics_bench.py",
    "examples/celery_tasks.py",
    "examples/fastapi_app.py",
    "examples/django_shop/shop/views.py",
)


def on_files(files: Files, config: Any) -> Files:
    for path in OUTSIDE:
        site = config["site_dir"]
        files.append(File(path, str(ROOT), site, config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A page ``depth`` folders down docs/ reaches the repository's root with one more
    ``../`` than the site's root: drop it from the links to the pages brought in."""
    if page.file.src_uri == "bench/README.md":
        return markdown.replace("](../docs/", "](../")
    depth = page.file.src_uri.count("/")
    up = "../" * depth
    for folder in ("bench/", "examples/"):
        markdown = markdown.replace(f"](../{up}{folder}", f"]({up}{folder}")
    return markdown
