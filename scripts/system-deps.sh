#!/usr/bin/env bash
# Installs the Debian packages the heavy test suites need, only when they are missing;
# with --compiler, only the C compiler that builds testbed's extension.
set -euo pipefail
need=()
if [ "${1:-}" = --compiler ]; then  # only what builds testbed's C extension for ${2:-python3}
  command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
  headers='import os, sys, sysconfig; sys.exit(not os.path.isfile(sysconfig.get_paths()["include"] + "/Python.h"))'
  "${2:-python3}" -c "$headers" || need+=("$(basename "${2:-python3}")-dev")  # Debian's own Python
else
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v runuser >/dev/null 2>&1 || need+=(util-linux)
  command -v prometheus >/dev/null 2>&1 || need+=(prometheus)  # the captures' range queries
fi
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi
