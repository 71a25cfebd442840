#!/usr/bin/env bash
# Creates .venv and installs fencelock into it, with the extras named in $1
# (e.g. "test"). Installs Python's venv support from Debian when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
stamp=".venv/.installed-${extras:-base}"

python_ok() { command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; }
if ! python_ok; then
    echo "bootstrap: installing python3 and python3-venv from Debian" >&2
    apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    spec="."
    [ -n "$extras" ] && spec=".[${extras}]"
    .venv/bin/python -m pip install -q -e "$spec"
    touch "$stamp"
fi
