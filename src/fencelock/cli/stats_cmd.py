"""``fencelock stats URL...``: the five metrics of a fleet, from the scrapes of its
processes (each serving ``fencelock.metrics.serve(port)`` or the Prometheus exporter),
added up by lock-name prefix, with the article's thresholds marked."""

from __future__ import annotations

import base64
import http.client
import json
import math
import sys
import urllib.error
import urllib.parse
import urllib.request

import click
from rich.console import Console
from rich.table import Table

from fencelock.cli import exitcodes, fail
from fencelock.engine.urls import redact
from fencelock.metrics.exposition import parse
from fencelock.metrics.registry import PrefixMetrics

SCRAPE_TIMEOUT = 5.0


def scrape(urls: tuple[str, ...]) -> dict[str, PrefixMetrics]:
    """Every URL's metrics, added up; one clear line (exit 69) for one that fails, the
    URL's password shown as ``***`` (as everywhere: :func:`~fencelock.engine.urls.redact`)."""
    found: dict[str, PrefixMetrics] = {}
    for url in urls:
        if not url.startswith(("http://", "https://")):
            fail(f"{redact(url)!r} is not an http:// or https:// metrics address", exitcodes.USAGE)
        try:
            text = fetch(url)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = _hidden(str(getattr(exc, "reason", exc)), url)
            fail(f"could not scrape {redact(url)}: {reason}", exitcodes.UNAVAILABLE)
        parse(text, found)
    return found


def fetch(url: str) -> str:
    """The page at ``url``; a ``user:password@`` in it goes as HTTP basic auth (urllib
    would take it for part of the host name), to that host only, not after a redirect."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    request = urllib.request.Request(parts._replace(netloc=host).geturl())  # noqa: S310 (scrape admits only http and https URLs)
    if at:
        user, _, password = userinfo.partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        request.add_unredirected_header(
            "Authorization", "Basic " + base64.b64encode(pair.encode()).decode()
        )
    with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT) as reply:  # noqa: S310 (scrape admits only http and https URLs)
        text: str = reply.read().decode("utf-8", errors="replace")
    return text


def _hidden(reason: str, url: str) -> str:
    """``reason`` (an error's text, which may quote the URL) without the URL's password."""
    userinfo, at, _ = url.partition("://")[2].partition("/")[0].rpartition("@")
    password = userinfo.partition(":")[2] if at else ""
    for secret in {password, urllib.parse.unquote(password)} - {""}:
        reason = reason.replace(secret, "***")
    return reason


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return "> 120s" if value == math.inf else f"{value:g}s"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def as_dict(metrics: PrefixMetrics) -> dict[str, object]:
    """One prefix's numbers, for ``--json``."""
    acquire_p99 = metrics.acquire_seconds.quantile(0.99)
    hold_p99 = metrics.hold_seconds.quantile(0.99)
    return {
        "prefix": metrics.prefix,
        "acquisitions": metrics.acquisitions,
        "contention_rate": metrics.contention_rate,
        "acquire_p99_seconds": None if acquire_p99 in (None, math.inf) else acquire_p99,
        "hold_p99_seconds": None if hold_p99 in (None, math.inf) else hold_p99,
        "timeout_rate": metrics.timeout_rate,
        "fencing_rejections": metrics.fencing_rejections,
        "renewals": metrics.renewals,
        "renewal_failures": metrics.renewal_failures,
        "lost": {cause: n for cause, n in metrics.lost.items() if n},
        "waiting": metrics.waiting,
        "ttl_seconds": metrics.ttl,
        "warnings": metrics.warnings(),
    }


def show(found: dict[str, PrefixMetrics]) -> None:
    table = Table(title="fencelock: the five metrics, by lock-name prefix")
    for header in (
        "prefix", "acquired", "contention", "acquire p99", "hold p99", "TTL",
        "timeouts", "fencing rejections", "lost", "renewal failures", "waiting",
    ):  # fmt: skip
        table.add_column(header, justify="left" if header == "prefix" else "right")
    for prefix in sorted(found):
        m = found[prefix]
        table.add_row(
            prefix,
            str(m.acquisitions),
            _share(m.contention_rate),
            _seconds(m.acquire_seconds.quantile(0.99)),
            _seconds(m.hold_seconds.quantile(0.99)),
            _seconds(m.ttl),
            _share(m.timeout_rate),
            str(m.fencing_rejections),
            str(sum(m.lost.values())),
            str(m.renewal_failures),
            str(m.waiting),
        )
    console = Console(width=max(120, Console().width))
    console.print(table)
    for prefix in sorted(found):
        for warning in found[prefix].warnings():
            console.print(f"[bold red]![/] {prefix}: {warning}")


@click.command("stats")
@click.argument("urls", nargs=-1, metavar="URL...")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
def stats(urls: tuple[str, ...], as_json: bool) -> None:
    """The five metrics of the processes whose metrics addresses are given
    (fencelock.metrics.serve(9464) → http://HOST:9464/metrics), added up by prefix:
    acquisition p99, contention, hold p99, timeouts and fencing rejections, marked where
    past the thresholds (50% / 30% / 80% / 5% / any)."""
    if not urls:
        fail(
            "give the metrics address of at least one process (it serves them with "
            "fencelock.metrics.serve(port): http://HOST:PORT/metrics)",
            exitcodes.USAGE,
        )
    found = scrape(urls)
    if as_json:
        json.dump([as_dict(found[p]) for p in sorted(found)], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if not found:
        click.echo("no fencelock metrics at those addresses yet (no lock taken there)")
        return
    show(found)
