"""What the tools share: ``fencelock demo`` and ``fencelock check`` import this, never each other.

The drawing kit of their SVG timelines (:mod:`.palette`, :mod:`.scale`, :mod:`.svg`,
:mod:`.labels`, :mod:`.page`) and the handling of their worker processes and SQLite files
(:mod:`.processes`, :mod:`.resources`). The library itself never imports it.
"""
