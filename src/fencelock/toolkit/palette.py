"""The colours and the font of every timeline and report page: one colour per meaning."""

from __future__ import annotations

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Helvetica, Arial, sans-serif"

PAPER = "#fff"
INK = "#1f2937"  # text
PROSE = "#374151"  # paragraphs
MUTED = "#6b7280"  # secondary text, axis
GRID = "#e5e7eb"  # tick lines, borders
FAINT = "#d1d5db"  # separators between figures in a line
STRIPE = "#f8fafc"  # every other row
PAGE = "#fafafa"  # behind the figures

WAIT = "#cbd5e1"  # waiting for the lock
HOLD = "#3b6fb6"  # a lease held
GHOST = "#dbe6f6"  # a lease its holder still believed in after it was gone
PAUSE = "#dc2626"  # a process frozen (SIGSTOP)
SOLD = "#16a34a"  # a write accepted
DOUBLE = "#dc2626"  # a write that broke the invariant (sold twice, out of token order)
REJECTED = "#d97706"  # a stale write the fence rejected
ERROR = "#9ca3af"  # a write whose outcome is unknown
OVERLAP = "#fca5a5"  # two clients believed they held the lock at once
SERVER = "#7c3aed"  # a fault of the lock servers
SERVER_TINT = "#faf7ff"  # the servers' lane
PARTITION = "#0891b2"  # a client cut off from the servers

PASS_BG, PASS_FG, PASS_LINE = "#ecfdf5", "#166534", "#a7f3d0"  # the verdict banner
FAIL_BG, FAIL_FG, FAIL_LINE = "#fef2f2", "#991b1b", "#fecaca"
