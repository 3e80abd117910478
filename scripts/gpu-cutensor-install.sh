#!/usr/bin/env bash
# Installs cuTENSOR (for the library paths' `gemm=cutensor`) on the GPU machine from parts
# carried over five device calls: libcutensor.so.2 of the `cutensor-cu13` wheel (323 MB, the
# wheel 210 MB) is over one call's carry limit (64 MiB with the working tree's 23 MB), so it
# travels xz-compressed (181 MB) in 42 MB parts (`split -b 42000000 -d libcutensor.so.2.xz
# .ct/part.`, its sha256 in .ct/sha). Calls 1 to 4 carry .ct/part.00 .. .ct/part.03, one each,
# and run `scripts/gpu-cutensor-install.sh stash`; call 5 carries .ct/part.04 and .ct/sha and
# runs `scripts/gpu-cutensor-install.sh`, which joins, checks and unpacks them into $CT_DIR and
# prints the EVOATTN_CUTENSOR to export. The machine must stay warm between the calls (the
# stash lives outside the repository; it is released after 30 s idle).
set -euo pipefail
stash=${STASH:-/root/ctstash}
target=${CT_DIR:-/root/ct}
mkdir -p "$stash"
if [[ ${1:-} == stash ]]; then
    cp .ct/part.0* "$stash"/
    ls -la "$stash"
    exit 0
fi
cp .ct/part.0* "$stash"/
cat "$stash"/part.0* > "$stash/libcutensor.so.2.xz"
echo "$(cat .ct/sha)  $stash/libcutensor.so.2.xz" | sha256sum -c - >&2
mkdir -p "$target"
xz -dc "$stash/libcutensor.so.2.xz" > "$target/libcutensor.so.2"
echo "EVOATTN_CUTENSOR=$target"
