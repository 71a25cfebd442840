"""The monitoring that ships in deploy/: the alert rules and their thresholds (promtool's
own rule tests), the Grafana dashboard's queries (valid PromQL), and a real Prometheus
scraping a real process's metrics and loading the rules."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fencelock.testing.tools import free_port

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "fencelock-alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "fencelock-dashboard.json"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")

pytestmark = pytest.mark.skipif(
    PROMTOOL is None or PROMETHEUS is None,
    reason="Debian's prometheus package (make servers installs it)",
)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_alert_rules_fire_at_the_articles_thresholds() -> None:
    checked = promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "fencelock-alerts.test.yml", cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(queries) >= 5
    records = [
        {"record": f"fencelock:dashboard:panel{i}", "expr": q.replace("$prefix", ".*")}
        for i, q in enumerate(queries)
    ]
    rules = tmp_path / "dashboard-rules.json"  # YAML is a superset of JSON
    rules.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": records}]}))
    checked = promtool("check", "rules", rules.name, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(queries)} rules found" in checked.stdout


SERVING = textwrap.dedent(
    """
    import sys, fencelock, fencelock.metrics
    server = fencelock.metrics.serve(int(sys.argv[1]))
    with fencelock.connect("memory://scraped") as client:
        for _ in range(5):
            client.lock("orders/1", ttl=5).acquire().release()
        print("ready", flush=True)
        sys.stdin.read()
    """
)


@pytest.fixture
def served() -> Iterator[int]:
    """A process that took five locks and serves its metrics: its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVING, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    try:
        yield port
    finally:
        process.communicate(timeout=30)


def _api(port: int, path: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/{path}", timeout=5) as reply:
        answer: dict[str, object] = json.load(reply)
        return answer


def test_a_real_prometheus_scrapes_the_metrics_and_loads_the_rules(
    tmp_path: Path, served: int
) -> None:
    assert PROMETHEUS is not None
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {"job_name": "app", "static_configs": [{"targets": [f"127.0.0.1:{served}"]}]}
                ],
            }
        )
    )
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        query = urllib.parse.quote('fencelock_acquisitions_total{prefix="orders"}')
        deadline, value = time.monotonic() + 60, None
        while value is None:
            assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.5)
            try:
                found = _api(port, f"query?query={query}")
            except OSError:
                continue
            results = found["data"]["result"]  # type: ignore[index]
            value = results[0]["value"][1] if results else None
        assert value == "5"
        groups = _api(port, "rules")["data"]["groups"]  # type: ignore[index]
        rules = [rule for group in groups for rule in group["rules"]]
        assert {r["name"] for r in rules} >= {"FencelockFencingRejection", "FencelockHoldLong"}
        assert all(r["health"] in ("ok", "unknown") for r in rules)
    finally:
        server.terminate()
        server.wait(30)
