#!/usr/bin/env bash
# Fetches, here (Debian, with network), the .deb files of leanback's build dependencies into
# .debs/ (git-ignored) for a machine that has a compiler, CMake and CUDA but none of our
# Debian packages and no network: the device tool's GPU machine. tools/gpu_check.sh unpacks
# them there (tools/offline_prefix.sh) when the system lacks them. Pass `.debs` in the device
# run's `carry`. Idempotent; about 15 MB.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.debs"
# The -dev packages the build finds (CMakeLists.txt) and the shared libraries they link.
pkgs=(nlohmann-json3-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libgtest-dev
      libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 liblapacke-dev liblapacke
      liblapack3 libblas3 libtmglib3 libgfortran5 libquadmath0 libutf8proc-dev libutf8proc2 libstb-dev libstb0
      libcli11-dev pkg-config pkgconf pkgconf-bin libpkgconf3)
mkdir -p "$dest"
cd "$dest"
missing=()
for p in "${pkgs[@]}"; do
  compgen -G "${p}_*.deb" > /dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get download "${missing[@]}" > /dev/null
fi
echo "fetch_gpu_debs: $(ls "$dest"/*.deb | wc -l) packages, $(du -sh "$dest" | cut -f1) in $dest"
