#!/usr/bin/env bash
# Installs the Debian packages apbot needs, only those that are missing. Runs apt-get as root,
# or through sudo otherwise.
#   scripts/deps.sh          what building and running need (`make`, `make demo`)
#   scripts/deps.sh --test   that, plus what only the tests and the benchmark need
#                            (`make test`, `make bench`): headless Chromium and Node.js for
#                            the HTML and review-page checks, the PostgreSQL server the
#                            PostgreSQL backend is tested against, valgrind (the memcheck
#                            test), systemd (systemd-analyze checks contrib/systemd/), the
#                            Prometheus project's Python client (its exposition parsers read
#                            the metrics in t_metrics), aiosmtpd and openssl (the SMTP server
#                            and the certificates of t_mail)
# Further arguments are extra package names.
set -eu
pkgs=(cmake make gcc pkg-config libcurl4-openssl-dev libxml2-dev libsqlite3-dev libssl-dev
      libpcre2-dev libcmocka-dev libmicrohttpd-dev libcsv-dev libjansson-dev libqpdf-dev
      zlib1g-dev sqlite3 curl libpq-dev libcrypt-dev)
test_pkgs=(chromium nodejs postgresql postgresql-client valgrind systemd
           python3-prometheus-client python3-aiosmtpd openssl)
if [ "${1:-}" = "--test" ]; then
    shift
    pkgs+=("${test_pkgs[@]}")
fi
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || true
$sudo apt-get install -y -qq "${missing[@]}"
