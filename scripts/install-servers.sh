#!/usr/bin/env bash
# Installs what the test suite runs besides Python (Debian packages), when missing:
# the lock servers (Redis, etcd, ZooKeeper, PostgreSQL, PgBouncer, MariaDB), libfaketime for
# clock faults, Chromium for the report screenshot.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v openssl >/dev/null || need+=(openssl)
# etcd and ZooKeeper, for the consensus backends (3-member clusters on loopback).
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# PostgreSQL 15 for the SQL backends (the suite runs initdb and postgres itself).
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
# PgBouncer in front of it, and MariaDB 10.11 (mariadbd and pgbouncer are in /usr/sbin).
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
command -v java >/dev/null || need+=(default-jre-headless)
# The HTML report test takes a screenshot in headless Chromium.
command -v chromium >/dev/null || need+=(chromium)
# The alert rules and dashboard queries are checked with Prometheus's promtool, and the
# exposition is scraped by a real Prometheus.
command -v promtool >/dev/null || need+=(prometheus)
# fencelock top is tested in a real terminal.
command -v tmux >/dev/null || need+=(tmux)
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
# Debian starts services on the default ports (redis 6379, etcd 2379, ZooKeeper 2181,
# PostgreSQL 5432, PgBouncer 6432, MariaDB 3306, Prometheus 9090);
# the tests start their own on free ports.
for service in redis-server etcd zookeeper postgresql pgbouncer mariadb prometheus prometheus-node-exporter; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$service" 2>/dev/null; then
        systemctl stop "$service" || true
    fi
done
