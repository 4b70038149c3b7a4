#!/usr/bin/env bash
# Installs everything the product and its tests need on a fresh Debian machine:
# tshark and tcpdump (the Wireshark oracle and the recorder), kcat, tcpreplay and iproute2
# (the replay lab: a capture replayed onto a veth pair), a Java runtime for Spark, Chromium
# (headless, to look at a report page), and the package itself with its test and report
# dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tshark >/dev/null || need+=(tshark)
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v kcat >/dev/null || need+=(kcat)
command -v tcpreplay >/dev/null || need+=(tcpreplay)
command -v ip >/dev/null || need+=(iproute2)
command -v chromium >/dev/null || need+=(chromium)
# Spark 4 runs on Java 17 or 21; Debian 12's default-jre-headless is OpenJDK 17.
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
  need+=(default-jre-headless)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m pip install -q -e ".[test,spark,report]"
# pyenv only sees new console scripts after a rehash.
if command -v pyenv >/dev/null; then pyenv rehash; fi
