#!/usr/bin/env bash
# Installs FlashAttention-4 (CuTe DSL) on the GPU machine from carried wheels, for the `fa4`
# peer. The cu13 libs wheel is over one device call's carry limit, so it travels split in two
# (`split -b 52m`: the repository travels too): call 1 stashes part .aa outside the repo (STASH), call 2 brings part .ab
# and the other wheels (flash-attn-4, nvidia-cutlass-dsl, -libs-base, -libs-core,
# quack-kernels, apache-tvm-ffi, torch-c-dlpack-ext, einops) and runs this script, which joins them and installs with
# `pip install --no-deps --target $FA4_DIR`. Prints the PYTHONPATH to export.
# usage: scripts/gpu-fa4-install.sh WHEEL_DIR   (STASH default /root/fa4parts, FA4_DIR /root/fa4)
set -euo pipefail
wheels=$1
stash=${STASH:-/root/fa4parts}
target=${FA4_DIR:-/root/fa4}
cu13=nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
cat "$stash"/cu13.part.aa "$wheels"/cu13.part.ab > "$stash/$cu13"
# Several wheels share the nvidia_cutlass_dsl/ folder, and pip --target skips a folder that
# already exists: install all of them at once into a fresh target.
rm -rf "$target"
pip install --quiet --no-deps --target "$target" "$stash/$cu13" "$wheels"/*.whl
# The DSL's own Python packages live below the install, not at its top.
dsl=$(find "$target/nvidia_cutlass_dsl" -maxdepth 2 -type d -name '*packages' | head -1)
echo "PYTHONPATH=$target:$dsl"
