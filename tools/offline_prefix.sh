# Sourced by tools/gpu_check.sh: unpacks the .deb files tools/fetch_gpu_debs.sh fetched
# (.debs/, carried to a machine without our Debian packages or network) into the prefix
# .debs/root with `dpkg -x` (no maintainer scripts: the alternatives links OpenBLAS's
# postinst would make are made here), and points the compiler, linker, loader, pkg-config
# and CMake at it. Sets LB_OFFLINE_CMAKE_ARGS for the configure line; a no-op without .debs.
# Usage: source tools/offline_prefix.sh ROOT
lb_offline_root="$1"
LB_OFFLINE_CMAKE_ARGS=()
if compgen -G "$lb_offline_root/.debs/*.deb" > /dev/null; then
  pfx="$lb_offline_root/.debs/root"
  if [ ! -f "$pfx/.unpacked" ]; then
    mkdir -p "$pfx"
    for f in "$lb_offline_root"/.debs/*.deb; do
      if command -v dpkg > /dev/null; then
        dpkg -x "$f" "$pfx"
      else  # a .deb is an ar archive holding data.tar.*
        (d="$(mktemp -d)" && cd "$d" && ar x "$f" && tar -xf data.tar.* -C "$pfx" && rm -rf "$d")
      fi
    done
    lib="$pfx/usr/lib/x86_64-linux-gnu"
    for so in libopenblas.so.0 libopenblas.so libblas.so.3 libblas.so liblapack.so.3 liblapack.so; do
      [ -e "$lib/openblas-pthread/$so" ] && ln -sf "openblas-pthread/$so" "$lib/$so"
    done
    touch "$pfx/.unpacked"
  fi
  lib="$pfx/usr/lib/x86_64-linux-gnu"
  export CPATH="$pfx/usr/include:$pfx/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$lib:$lib/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Only the prefix's .pc files, their /usr paths re-rooted into the prefix.
  export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$pfx/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$pfx"
  command -v pkg-config > /dev/null || export PATH="$PATH:$pfx/usr/bin"
  LB_OFFLINE_CMAKE_ARGS=(-DCMAKE_PREFIX_PATH="$pfx/usr")
  echo "offline_prefix: build dependencies from $pfx"
fi
