#!/usr/bin/env bash
# Installs what leanback needs on a fresh Debian machine (idempotent; quiet when all is there).
set -euo pipefail
pkgs=(cmake g++ make ccache nlohmann-json3-dev libspdlog-dev libgtest-dev libopenblas-dev
      liblapacke-dev pkg-config libutf8proc-dev libstb-dev libcli11-dev python3-matplotlib
      clang libclang-rt-dev libomp-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
