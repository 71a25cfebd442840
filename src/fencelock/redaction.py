"""What a command line may show of itself to every reader of the lock store.

A lease records its holder's program (:mod:`fencelock.holder`), never its arguments:
they carry passwords and tokens. For an interpreter it records what runs, when that is a
file or a module (``python3 report.py``, ``python3 -m celery``, ``php -f cron.php``),
and when the code is given inline, only the option that gave it (``perl -e``,
``node --eval``, ``bash -c``): the code itself is often a whole script with its
secrets. :data:`INTERPRETERS` is the table of what each interpreter's options take.

Every other program (``psql -c``, ``mysql -pSECRET -e``, ``redis-cli -a SECRET``,
``awk 'PROGRAM'``, ``jq``, ``env``, ``sudo``) is recorded by its name alone, so none of
its words reach the store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["INTERPRETERS", "Interpreter", "masked_options", "shown_command"]


@dataclass(frozen=True)
class Interpreter:
    """What one interpreter's options take. Short options are letters, bundled or not
    (``-lne``); a value is attached (``-Ilib``) or the next word (``-I lib``)."""

    names: str  # a regular expression for the program's name (versions allowed)
    code: str = ""  # letters whose value is code: recorded as the option alone
    code_long: frozenset[str] = frozenset()  # long options whose value is code
    runs: str = ""  # letters naming the module or file to run (python -m, php -f)
    valued: str = ""  # letters that take a value, attached or the next word
    attached: str = ""  # letters whose value, if any, is attached only (perl -i.bak)
    valued_long: frozenset[str] = frozenset()  # long options taking the next word
    stdin: str = ""  # letters after which the code comes from stdin (sh -s): args follow
    plus: bool = False  # ``+o name`` is an option too (the shells)

    def matches(self, program: str) -> bool:
        return re.fullmatch(self.names, program) is not None


INTERPRETERS = (
    Interpreter(
        names=r"(python|pypy)[0-9.]*",
        code="c",
        runs="m",
        valued="WXQ",
        valued_long=frozenset({"--check-hash-based-pycs"}),
    ),
    Interpreter(
        names=r"perl[0-9.]*",
        code="eE",
        valued="I",
        attached="CDFMVdimx",
    ),
    Interpreter(
        names=r"ruby[0-9.]*|jruby|truffleruby",
        code="e",
        valued="CEIr",
        attached="FKTWix",
        valued_long=frozenset(
            {"--encoding", "--external-encoding", "--internal-encoding", "--enable"}
            | {"--disable", "--dump", "--backtrace-limit", "--crash-report", "--parser"}
        ),
    ),
    Interpreter(
        names=r"node(js)?[0-9.]*|bun|deno",
        code="ep",
        code_long=frozenset({"--eval", "--print"}),
        valued="Cr",
        valued_long=frozenset(
            {"--require", "--import", "--loader", "--experimental-loader", "--input-type"}
            | {"--title", "--conditions", "--env-file", "--inspect-port", "--disable-warning"}
            | {"--redirect-warnings", "--experimental-config-file", "--watch-path"}
        ),
    ),
    Interpreter(
        names=r"php[0-9.]*(-cli)?",
        code="rBRE",
        runs="fF",
        valued="cdzSt",
    ),
    Interpreter(
        names=r"(ba|da|z|k|mk|a)?sh|yash",
        code="c",
        valued="oO",
        stdin="s",
        valued_long=frozenset({"--rcfile", "--init-file"}),
        plus=True,
    ),
    Interpreter(
        names=r"lua(jit)?[0-9.]*",
        code="e",
        valued="l",
    ),
    Interpreter(
        names=r"Rscript",
        code="e",
        valued_long=frozenset({"--default-packages"}),
    ),
)

# A script's name as it may be recorded: a path, not code (no spaces, quotes, brackets,
# operators). A word that is not one (an unknown option's value, say) is left out.
_FILE_NAME = re.compile(r"[\w.+@%~/-]+")


def shown_command(argv: Sequence[str]) -> str:
    """What identifies a command without its arguments: ``["python3", "job.py",
    "--token=x"]`` is ``python3 job.py``; ``["python3", "-m", "celery", "worker"]`` is
    ``python3 -m celery``; ``["perl", "-e", CODE]`` is ``perl -e``;
    ``["/usr/bin/rsync", "-a", "src", "dst"]`` is ``rsync``."""
    if not argv:
        return ""
    program = os.path.basename(argv[0]) or argv[0]
    interpreter = next((i for i in INTERPRETERS if i.matches(program)), None)
    if interpreter is None:
        return program
    runs = _what_runs(interpreter, argv[1:])
    return f"{program} {runs}" if runs else program


def _what_runs(interpreter: Interpreter, args: Sequence[str]) -> str:
    """What an interpreter's arguments say it runs: the option that gave code inline, the
    module or file it runs, or the script; "" when it cannot tell safely."""
    at = 0
    while at < len(args):
        arg = args[at]
        following = args[at + 1] if at + 1 < len(args) else None
        if arg == "-":  # the code comes from stdin; what follows is its arguments
            return "-"
        if arg == "--":
            return _script(following)
        if arg.startswith("--"):
            name, equals, _ = arg.partition("=")
            if name in interpreter.code_long:
                return name
            at += 2 if name in interpreter.valued_long and not equals else 1
            continue
        if arg.startswith("-") or (interpreter.plus and arg.startswith("+") and arg != "+"):
            said, takes_next = _bundle(interpreter, arg, following)
            if said is not None:
                return said
            at += 2 if takes_next else 1
            continue
        return _script(arg)
    return ""


def _bundle(interpreter: Interpreter, arg: str, following: str | None) -> tuple[str | None, bool]:
    """One word of short options (``-lne``, ``-Ilib``, ``-W error``): what it says runs
    (None: nothing yet), and whether its value is the next word."""
    for at, letter in enumerate(arg[1:], start=1):
        rest = arg[at + 1 :]
        if letter in interpreter.code:
            return arg[: at + 1], False  # the code (attached or next) is never shown
        if letter in interpreter.stdin:
            return arg[: at + 1], False
        if letter in interpreter.runs:  # python -m celery, php -f cron.php
            target = _script(rest or following)
            return (f"-m {target}".rstrip() if letter == "m" else target or f"-{letter}"), False
        if letter in interpreter.valued:
            return None, not rest
        if letter in interpreter.attached:
            return None, False
    return None, False


def _script(word: str | None) -> str:
    """A script's or module's name (its last path part), if it looks like one."""
    if word is None:
        return ""
    name = os.path.basename(word.rstrip("/")) or word
    return name if _FILE_NAME.fullmatch(name) else ""


# An option whose value is a secret by its name: --password=..., --db-pass=..., --token=...
_SECRET_OPTION = re.compile(
    r"(-{1,2}[\w-]*(?:pass(?:word|wd)?|secret|token|api[-_]?key|credentials?)[\w-]*=)\S+",
    re.IGNORECASE,
)


def masked_options(text: str) -> str:
    """``text`` (a label someone wrote) with the value of every ``--password=``-like
    option replaced by ``***``."""
    return _SECRET_OPTION.sub(lambda option: f"{option.group(1)}***", text)
