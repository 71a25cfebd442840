#!/usr/bin/env bash
# The other Pythons pyproject.toml declares (3.10, 3.12, 3.13; the default one runs the
# whole suite in `make test`): each gets a venv of its own (.venv-pyX.Y, with the test
# extra) and runs tests/unit and the contract suite, sync and async, on every backend.
# An interpreter that is not installed is named in the last lines, never skipped
# silently; any failure fails the run. Interpreters are found on PATH (python3.X) or
# in pyenv's versions.
set -uo pipefail
cd "$(dirname "$0")/.."
versions="${PYTHON_MATRIX:-3.10 3.12 3.13}"
tests="tests/unit tests/contract/test_contract.py tests/contract/test_contract_async.py"

find_python() {
    # pyenv's versions first: its shim on PATH names every version it has, but runs
    # only the ones selected; whatever is found must run.
    local v="$1" root candidate
    root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
    for candidate in "$root"/versions/"$v".*/bin/python"$v" "$(command -v "python$v" 2>/dev/null)"; do
        if [ -x "$candidate" ] && "$candidate" -c 'import venv' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

summary=()
failed=0

# run_suite LABEL PYTHON TESTS...: pytest with PYTHON, its last lines shown, its outcome
# added to the summary under LABEL; a failed run's failing tests are named there too
# (with the first lines of each one's report), so the summary alone says what broke.
run_suite() {
    local label="$1" python="$2" log status counts line
    shift 2
    echo "python-matrix: $label: $*" >&2
    log="$(mktemp)"
    "$python" -m pytest -q -n 2 -p no:cacheprovider -rfE "$@" 2>&1 | tee "$log" | tail -n 15
    status=${PIPESTATUS[0]}
    counts="$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$log" | tail -n 1)"
    if [ "$status" -eq 0 ]; then
        summary+=("$label: passed ($counts)")
    else
        summary+=("$label: FAILED ($counts)"); failed=1
        while IFS= read -r line; do summary+=("    $line"); done \
            < <(grep -E '^(FAILED|ERROR) ' "$log" | cut -c1-300)
        # the reports themselves, for the log a failed CI run keeps
        sed -n '/^=\+ \(FAILURES\|ERRORS\) =\+$/,/^=\+ short test summary/p' "$log" \
            | head -n 200 >&2
    fi
    rm -f "$log"
}
for v in $versions; do
    if ! python="$(find_python "$v")"; then
        summary+=("Python $v: NOT INSTALLED (neither python$v on PATH nor in pyenv): not tested")
        continue
    fi
    venv=".venv-py$v"
    stamp="$venv/.installed-test"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv" || { summary+=("Python $v: FAILED to make $venv"); failed=1; continue; }
        "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        if ! "$venv/bin/python" -m pip install -q -e ".[test]"; then
            summary+=("Python $v: FAILED to install fencelock[test]"); failed=1; continue
        fi
        touch "$stamp"
    fi
    full="$("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
    # (not the API reference's test: it builds the docs site, a tool of the project's,
    # with the default interpreter's toolchain in the main suite; on 3.10 the newest
    # pymdown-extensions and Markdown that pip resolves do not build it)
    # shellcheck disable=SC2086
    run_suite "Python $full" "$venv/bin/python" $tests --ignore=tests/unit/test_api_reference.py
done
# The drivers' oldest releases, as pyproject.toml's lower bounds pin them, on the default
# Python: the contract suite on the backends they serve.
lower_pins="$(.venv/bin/python - <<'PY'
import re, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for extra in ("redis", "zookeeper", "postgresql", "mysql", "prometheus", "otel"):
    for requirement in extras[extra]:
        name, low = re.match(r"([A-Za-z0-9_.\[\]-]+)>=([0-9][^,;]*)", requirement).groups()
        print(f"{name}=={low}")
PY
)"
lower=".venv-lower"
if [ ! -x "$lower/bin/python" ] || [ pyproject.toml -nt "$lower/.installed" ]; then
    rm -rf "$lower"
    .venv/bin/python -m venv "$lower" && "$lower/bin/python" -m pip install -q --upgrade pip >/dev/null
    # shellcheck disable=SC2086
    if "$lower/bin/python" -m pip install -q -e . $lower_pins pymysql lupa h11 \
        "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5" "hypothesis>=6.100"; then
        touch "$lower/.installed"
    fi
fi
if [ -f "$lower/.installed" ]; then
    FENCELOCK_TEST_BACKENDS=redis,redlock,zookeeper,postgresql,advisory,mysql \
        run_suite "oldest drivers ($(echo $lower_pins))" "$lower/bin/python" \
        tests/contract/test_contract.py tests/contract/test_contract_async.py
else
    summary+=("oldest drivers: FAILED to install $(echo $lower_pins)"); failed=1
fi
# The oldest integrations the package declares: SQLAlchemy 1.4 (its newest release; the
# default venv has 2.x), the integration's tests that use only the API 1.4 has, its legacy
# Connection and psycopg2 (1.4 has no psycopg 3); and Django 4.2 LTS (the default venv
# has 5.x), the Django integration's tests, by Django's own test runner.
oldest=".venv-integrations-oldest"
if [ ! -x "$oldest/bin/python" ] || [ pyproject.toml -nt "$oldest/.installed" ]; then
    rm -rf "$oldest"
    .venv/bin/python -m venv "$oldest" && "$oldest/bin/python" -m pip install -q --upgrade pip >/dev/null
    if "$oldest/bin/python" -m pip install -q -e . "sqlalchemy>=1.4,<2" psycopg2-binary \
        "django>=4.2,<5" "psycopg[binary]>=3.2.1" pymysql "aiomysql>=0.2,<0.4" \
        "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5" "hypothesis>=6.100"; then
        touch "$oldest/.installed"
    fi
fi
if [ -f "$oldest/.installed" ]; then
    oldest_versions=$("$oldest/bin/python" -c 'import django, sqlalchemy; print(f"SQLAlchemy {sqlalchemy.__version__}, Django {django.__version__}")')
    run_suite "$oldest_versions" "$oldest/bin/python" tests/sql/test_sqlalchemy14.py tests/sql/test_django.py
else
    summary+=("SQLAlchemy 1.4 and Django 4.2: FAILED to install"); failed=1
fi

echo
echo "python-matrix (tests/unit and the contract suite on every backend, sync and async;"
echo "the SQLAlchemy integration on 1.4 and the Django integration on 4.2):"
for line in "${summary[@]}"; do echo "  $line"; done
exit "$failed"
