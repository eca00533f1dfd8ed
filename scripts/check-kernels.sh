#!/usr/bin/env bash
# Compiles every device/*.cu with NVRTC for sm_90 and fails on any error or warning.
#
# No GPU and no CUDA toolkit needed: NVRTC comes from the PyPI wheel nvidia-cuda-nvrtc,
# installed into a private folder (a venv, or `pip install --target` where the venv module
# is missing; either works as root on Debian, where PEP 668 blocks system installs).
# Then tests/nvrtc_kernels.rs runs with QFWD_REQUIRE_NVRTC=1, so a missing library is a
# failure here, not a skip.
#
# Environment: QFWD_NVRTC_DIR (install folder; default target/nvrtc), CARGO_TARGET_DIR,
# CARGO_ARGS (extra cargo test arguments, e.g. --release).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${QFWD_NVRTC_DIR:-$root/target/nvrtc}
mkdir -p "$dir"

find_lib() {
    # The real library (a regular file), not our links to it.
    find "$dir" -path "$dir/links" -prune -o -type f -name 'libnvrtc.so*' ! -name '*builtins*' \
        -print 2>/dev/null | sort | head -n 1
}

lib=$(find_lib)
if [[ -z "$lib" ]]; then
    echo "check-kernels: installing nvidia-cuda-nvrtc into $dir"
    if [[ -x "$dir/venv/bin/pip" ]] || python3 -m venv "$dir/venv" >/dev/null 2>&1; then
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "nvidia-cuda-nvrtc==13.0.*"
    elif python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install --quiet --disable-pip-version-check --target "$dir/site" \
            "nvidia-cuda-nvrtc==13.0.*"
    elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3-venv python3-pip >/dev/null
        python3 -m venv "$dir/venv"
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "nvidia-cuda-nvrtc==13.0.*"
    else
        echo "check-kernels: need python3 with venv or pip to install nvidia-cuda-nvrtc" >&2
        exit 1
    fi
    lib=$(find_lib)
fi
if [[ -z "$lib" ]]; then
    echo "check-kernels: nvidia-cuda-nvrtc installed but no libnvrtc.so* found in $dir" >&2
    exit 1
fi

# cudarc (dynamic loading) tries libnvrtc.so, libnvrtc.so.13, ... by name: give the
# library those names in a folder of links, beside its own folder (where NVRTC finds
# libnvrtc-builtins).
libdir=$(dirname "$lib")
links="$dir/links"
mkdir -p "$links"
for name in libnvrtc.so libnvrtc.so.13; do
    ln -sf "$lib" "$links/$name"
done
export LD_LIBRARY_PATH="$libdir:$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "check-kernels: using $lib"

cd "$root"
# shellcheck disable=SC2086
QFWD_REQUIRE_NVRTC=1 cargo test ${CARGO_ARGS:-} --test nvrtc_kernels -- --nocapture
