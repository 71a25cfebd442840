"""`import fencelock` loads only the errors: a client's machinery (asyncio, logging, the
backends) loads when a name that needs it is first used. Checked by what a fresh
interpreter has imported, not by a time: a loaded machine cannot break it."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "asyncio",
    "logging",
    "fencelock.client",
    "fencelock.backends",
    "fencelock.lease",
    "fencelock.integrations",  # imported by name only, never by `import fencelock`
    "sqlalchemy",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60
    )
    return set(done.stdout.split())


def test_import_fencelock_loads_none_of_a_clients_machinery() -> None:
    loaded = _loaded_after("import fencelock\nfencelock.FencelockError, fencelock.__version__")
    assert "fencelock.errors" in loaded
    assert not loaded & set(HEAVY)


def test_the_first_use_of_a_name_loads_what_it_needs() -> None:
    loaded = _loaded_after("import fencelock\nfencelock.connect")
    assert {"asyncio", "fencelock.client", "fencelock.log"} <= loaded


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    import fencelock

    for name in fencelock.__all__:
        value = getattr(fencelock, name)
        assert value is not None, name
        module = getattr(value, "__module__", None)
        if module is not None and name != "SKIPPED":
            assert module.startswith("fencelock."), (name, module)
    assert callable(fencelock.once)
    assert fencelock.once.__module__ == "fencelock.run_once"
