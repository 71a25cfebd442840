"""fencelock uses only public APIs of asyncio and of the drivers: what is private to them
changes between minor versions (Python 3.12 moved ``wait_for`` onto ``timeout()`` and
broke the blocking PostgreSQL and MySQL clients that leaned on asyncio's insides).

The AST of src/ (the simulator's own virtual-time loop in sim/ aside) is walked for a
name that starts with one underscore and is not fencelock's own: an attribute read or
written on something other than ``self``/``cls`` (a driver's subclass in src/ would be
missed: there is none), a ``getattr``/``setattr``/``hasattr``
of such a name, an import of one. fencelock's own names are those it defines (classes,
functions, attributes it sets on ``self``, class attributes, ``__slots__``); a name of a
known driver or asyncio insides is flagged even where fencelock also uses the word.
"""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "fencelock"
# Names public in spite of the underscore (os._exit, a namedtuple's methods).
PUBLIC = {"_exit", "_asdict", "_replace", "_fields", "_make"}
# Private names of asyncio and of the drivers, flagged even where fencelock has its own.
FOREIGN = {
    "_set_running_loop",
    "_get_running_loop",
    "_asyncio_future_blocking",
    "_waiter",
    "_ready",
    "_scheduled",
    "_selector",
    "_sock",
    "_reader",
    "_writer",
    "_connection",
    "_connect",
    "_WaitTimeout",
}
# The driver insides fencelock cannot do without, each behind one function, with the
# driver releases it holds for pinned by the test below (and an upper bound in
# pyproject.toml): (file, name) -> why.
ALLOWED = {
    # A GET_LOCK connection's end must reach the holder at once; aiomysql has no public
    # transport (one function: connections._streams, used by watch.py).
    ("backends/mysql/connections.py", "_reader"): "aiomysql",
    ("backends/mysql/connections.py", "_writer"): "aiomysql",
    # A blocking request cut to the call's end: redis-py has no public way to retime a
    # connected socket (one function: wire._set_timeouts).
    ("backends/redis/wire.py", "_sock"): "redis",
    # The session timeout the server granted: kazoo keeps it to itself (one method:
    # ZkSession._learn_negotiated_timeout's hook).
    ("backends/zookeeper/session.py", "_connection"): "kazoo",
    ("backends/zookeeper/session.py", "_connect"): "kazoo",
    # A model's table, fields and columns: Django's Model._meta API, documented and public
    # despite its underscore ("Model _meta API" in Django's reference).
    ("integrations/django/fences.py", "_meta"): "django",
}


def _own_names() -> set[str]:
    own: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif isinstance(node, ast.alias):
                own.add(node.asname or node.name.split(".")[-1])
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                own.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                pass
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(
                        statement.target, ast.Name
                    ):
                        own.add(statement.target.id)
    return own - FOREIGN


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC


def foreign_private_names(source: str, own: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every private name in ``source`` that is not fencelock's own."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if node.attr not in own:
                found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in own
        ):
            found.append((node.lineno, node.args[1].value))
        elif isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("fencelock"):
            found += [(node.lineno, a.name) for a in node.names if _private(a.name)]
    return found


def test_src_uses_no_private_name_of_asyncio_or_of_a_driver() -> None:
    own = _own_names()
    found = [
        (str(path.relative_to(SRC)), line, name)
        for path in sorted(SRC.rglob("*.py"))
        if "sim" not in path.relative_to(SRC).parts
        for line, name in foreign_private_names(path.read_text(), own)
        if (str(path.relative_to(SRC)), name) not in ALLOWED
    ]
    assert found == [], "private names of asyncio or of a driver:\n" + "\n".join(
        f"  src/fencelock/{path}:{line}: {name}" for path, line, name in found
    )


@pytest.mark.parametrize(
    "source",
    [
        "import asyncio\nasyncio._set_running_loop(None)\n",
        "def f(future):\n    future._asyncio_future_blocking = False\n",
        "def f(reader):\n    return getattr(reader, '_waiter', None)\n",
        "def f(loop):\n    return loop._ready\n",
        "from asyncio.events import _get_running_loop\n",
        "def f(conn):\n    return conn._totally_new_private\n",
    ],
)
def test_the_walk_finds_each_kind_of_private_use(source: str) -> None:
    assert foreign_private_names(source, _own_names()) != []


@pytest.mark.parametrize(
    ("driver", "module", "attribute_of"),
    [
        ("aiomysql", "aiomysql.connection", ("Connection", ("_reader", "_writer"))),
        ("redis", "redis.connection", ("AbstractConnection", ("_sock",))),
        ("kazoo", "kazoo.client", ("KazooClient", ("_connection",))),
    ],
)
def test_each_allowed_driver_inside_is_there_in_the_installed_release(
    driver: str, module: str, attribute_of: tuple[str, tuple[str, ...]]
) -> None:
    """Each allowed inside exists in the driver release installed (a new release that
    drops one fails here first), and is named in ALLOWED."""
    imported = pytest.importorskip(module)
    cls_name, names = attribute_of
    cls = getattr(imported, cls_name)
    source = Path(imported.__file__).read_text()
    version = importlib.metadata.version(driver)
    for name in names:
        assert name in source or hasattr(cls, name), f"{driver} {version} has no {name}"
        assert any(n == name for (_, n) in ALLOWED), name
