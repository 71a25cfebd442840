"""What a holder's command line shows every reader of the lock store: its program and
what it runs, never code given inline nor an argument (fencelock.redaction's table)."""

from __future__ import annotations

import pytest

from fencelock import holder
from fencelock.holder import masked
from fencelock.redaction import INTERPRETERS, shown_command

S = "SECRET"  # in every case below, where it must never come out

CASES = [
    # inline code: the option that gave it, never the code
    (["perl", "-e", f"print '{S}'"], "perl -e"),
    (["perl", "-E", f"say '{S}'"], "perl -E"),
    (["perl", "-lne", f"print if /{S}/"], "perl -lne"),
    (["perl", f"-le'print {S}'"], "perl -le"),
    (["perl", "-I", "lib", "-e", S], "perl -e"),
    (["perl", "-pi.bak", "-e", f"s/a/{S}/", "file"], "perl -e"),
    (["/usr/bin/perl5.36", "-Mstrict", "-e", S], "perl5.36 -e"),
    (["ruby", "-e", S], "ruby -e"),
    (["ruby", "-r", "json", "-e", S], "ruby -e"),
    (["ruby", "-ne", S], "ruby -ne"),
    (["node", "-e", S], "node -e"),
    (["node", "-p", S], "node -p"),
    (["node", "-pe", S], "node -p"),
    (["node", "--eval", S], "node --eval"),
    (["node", f"--eval={S}"], "node --eval"),
    (["node", "--print", S], "node --print"),
    (["nodejs", "--input-type", "module", "-e", S], "nodejs -e"),
    (["python3", "-c", S], "python3 -c"),
    (["python3", "-Sc", S], "python3 -Sc"),
    (["python3", f"-c{S}"], "python3 -c"),
    (["python3", "-X", "dev", "-c", S], "python3 -c"),
    (["sh", "-c", f"curl -u user:{S} https://x"], "sh -c"),
    (["bash", "-c", S], "bash -c"),
    (["bash", "-ec", S], "bash -ec"),
    (["bash", "-o", "pipefail", "-c", S], "bash -c"),
    (["bash", "--norc", "-c", S], "bash -c"),
    (["zsh", "-fc", S], "zsh -fc"),
    (["dash", "-c", S], "dash -c"),
    (["ksh", "-c", S], "ksh -c"),
    (["php", "-r", S], "php -r"),
    (["php", "-B", S, "-R", S], "php -B"),
    (["Rscript", "-e", S], "Rscript -e"),
    (["lua", "-e", S], "lua -e"),
    (["luajit", "-l", "socket", "-e", S], "luajit -e"),
    # code or arguments from stdin: the arguments that follow are the code's
    (["python3", "-", S], "python3 -"),
    (["bash", "-s", S], "bash -s"),
    (["node", "-", S], "node -"),
    # a script or module: its name, not its arguments nor the options' values
    (["python3", "job.py", f"--token={S}", "--db-password", S], "python3 job.py"),
    (["/usr/bin/python3.11", "-X", "dev", "/srv/app/report.py", S], "python3.11 report.py"),
    (["python3", "-m", "celery", "-A", "app", "worker", S], "python3 -m celery"),
    (["python3", "-mcelery", S], "python3 -m celery"),
    (["python3", "--", "job.py", f"--token={S}"], "python3 job.py"),
    (["perl", "-I", "lib", "-MEncode", "tool.pl", S], "perl tool.pl"),
    (["ruby", "-rjson", "-I", "lib", "app.rb", S], "ruby app.rb"),
    (["node", "--require", "dotenv/config", "server.js", S], "node server.js"),
    (["node", f"--title={S}", "server.js"], "node server.js"),
    (["php", "-d", f"mysql.default_password={S}", "cron.php", S], "php cron.php"),
    (["php", "-f", "cron.php", "--", S], "php cron.php"),
    (["bash", "+o", "posix", "deploy.sh", S], "bash deploy.sh"),
    (["Rscript", "--default-packages=stats", "job.R", S], "Rscript job.R"),
    (["lua", "-l", "socket", "job.lua", S], "lua job.lua"),
    # a word that is not a file's name is not recorded as one (an unknown option's value)
    (["python3", "--unknown-option", f"print({S!r})"], "python3"),
    (["perl", "-pi", "-e", f"s/x/{S}/", "file"], "perl -e"),
    # every other program: its name alone, none of its words
    (["awk", f'{{print "{S}"}}', "file"], "awk"),
    (["psql", "-c", f"ALTER USER app PASSWORD '{S}'"], "psql"),
    (["mysql", f"-p{S}", "-e", "SELECT 1"], "mysql"),
    (["mysql", f"--password={S}"], "mysql"),
    (["redis-cli", "-a", S, "PING"], "redis-cli"),
    (["curl", "-u", f"user:{S}", "https://x"], "curl"),
    (["/usr/bin/rsync", "-a", f"--password-file=/{S}", "src", "dst"], "rsync"),
    (["env", f"TOKEN={S}", "python3", "job.py"], "env"),
    (["ssh", "host", S], "ssh"),
    (["python3"], "python3"),
]


@pytest.mark.parametrize(("argv", "recorded"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_the_store_sees_what_runs_never_the_code_nor_an_argument(
    argv: list[str], recorded: str
) -> None:
    assert shown_command(argv) == recorded
    assert holder.program_of(argv) == recorded
    assert S not in recorded


def test_every_interpreter_of_the_table_has_a_case() -> None:
    programs = {argv[0].rsplit("/", 1)[-1] for argv, _ in CASES}
    for interpreter in INTERPRETERS:
        assert any(interpreter.matches(program) for program in programs), interpreter.names


def test_no_argv_is_this_python() -> None:
    assert holder.program_of([]).startswith(("python", "pypy"))


LABELS = [
    (
        "billing via postgresql://app:TopS3cretPW@db/prod",
        "billing via postgresql://app:***@db/prod",
    ),
    (f"sync --password={S} --db-pass={S}", "sync --password=*** --db-pass=***"),
    (f"sync --api-key={S} -secret={S}", "sync --api-key=*** -secret=***"),
    (f"job --token={S} keep=1 --verbose", "job --token=*** keep=1 --verbose"),
    ("nightly-billing", "nightly-billing"),
]


@pytest.mark.parametrize(("label", "shown"), LABELS)
def test_a_label_hides_url_passwords_and_password_options(label: str, shown: str) -> None:
    assert masked(label) == shown
