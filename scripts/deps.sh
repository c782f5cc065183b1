#!/usr/bin/env bash
# Installs the Debian packages apbot needs to build and test, only those that are missing.
# Runs apt-get as root, or through sudo otherwise.
set -eu
pkgs=(cmake make gcc pkg-config libcurl4-openssl-dev libxml2-dev libsqlite3-dev libssl-dev
      libpcre2-dev libcmocka-dev libmicrohttpd-dev libcsv-dev libjansson-dev sqlite3 curl
      chromium nodejs)
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
