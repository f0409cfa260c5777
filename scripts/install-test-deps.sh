#!/usr/bin/env bash
# The real components the test suite talks to, from Debian's packages (CI runs as root):
#   nginx-light  a reverse proxy: its default buffering in front of a stream, TLS termination
#   tinyproxy    a forward proxy (absolute-form requests and CONNECT tunnels)
#   openssl      a test CA and certificates, made by the tests in temporary folders
#   prometheus   a real Prometheus scraping --metrics-port (tests/integration/test_metrics_export.py)
#   prometheus-node-exporter  a real node exporter scraped by --host-metrics (tests/integration/test_telemetry.py)
#   chromium     a real headless browser on --dashboard's page (tests/e2e/test_dashboard.py),
#                driven over its DevTools protocol; no browser download
#   tmux         a real 80x30 terminal whose final screen the demo must fit (tests/e2e/test_screen.py)
#   iproute2, util-linux  ip and unshare: a 50 ms TUN link in a network namespace of its own
#                (tests/helpers/tun_delay.py; root and /dev/net/tun too)
# Tests that need one fail with a line naming the package when it is missing (tests/helpers/field.py).
# Idempotent: installs only what is missing; does nothing for a user without root.
# And from PyPI, for any user, in its own virtualenv (not the test extra: its graphql-core 3.3
# breaks mlflow's graphene, <3.3, and it downgrades anthropic):
#   arize-phoenix  a real OpenTelemetry receiver (OTLP/HTTP) whose REST API gives the stored
#                  spans back (tests/integration/test_otlp_phoenix.py, tests/helpers/phoenix.py);
#                  ~2 min to install here, ~860 MB; no network once installed
set -euo pipefail
phoenix_venv="${LLMBENCH_PHOENIX_VENV:-$HOME/.cache/llmbench-test/phoenix}"
# (pip show, not an import: importing phoenix makes ~/.phoenix)
if ! "$phoenix_venv/bin/pip" show -q arize-phoenix >/dev/null 2>&1; then
  python3 -m venv "$phoenix_venv"
  "$phoenix_venv/bin/pip" install -q 'arize-phoenix==20.26.1' 2>&1 | grep -v ' is ignored' || true
  "$phoenix_venv/bin/pip" show -q arize-phoenix >/dev/null
  echo "install-test-deps: installed arize-phoenix in $phoenix_venv"
fi
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v tinyproxy >/dev/null 2>&1 || [ -x /usr/bin/tinyproxy ] || need+=(tinyproxy)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need+=(prometheus)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || need+=(chromium)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v prometheus-node-exporter >/dev/null 2>&1 || [ -x /usr/bin/prometheus-node-exporter ] \
  || need+=(prometheus-node-exporter)
if [ ${#need[@]} -eq 0 ]; then
  echo "install-test-deps: nginx, tinyproxy, openssl, prometheus, its node exporter, chromium and tmux are installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-test-deps: missing ${need[*]}; as root: apt-get install -y ${need[*]}" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# the packages start their own daemons on the default ports: the tests start their own
# instances on free loopback ports, so stop the system ones (no systemd in a container: ignore)
for svc in nginx tinyproxy prometheus prometheus-node-exporter; do
  (service "$svc" stop || /etc/init.d/"$svc" stop) >/dev/null 2>&1 || true
done
echo "install-test-deps: installed ${need[*]}"
