#!/usr/bin/env bash
# Installs what the test suite runs besides Python (Debian packages), when missing:
# the lock servers, libfaketime for clock faults, Chromium for the report screenshot.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v openssl >/dev/null || need+=(openssl)
# The HTML report test takes a screenshot in headless Chromium.
command -v chromium >/dev/null || need+=(chromium)
# fencelock check's clock nemesis runs redis-server under libfaketime.
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need+=(libfaketime faketime)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-servers: need root to install: ${need[*]}" >&2
        exit 1
    fi
    echo "install-servers: installing ${need[*]} from Debian" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts a redis-server service on 6379; the tests start their own on free ports.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
    systemctl stop redis-server || true
fi
