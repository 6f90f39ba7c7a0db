#!/usr/bin/env bash
# How all_reduce_perf-1xH200-g1-nccl2.28.9.{json,txt} were made: nccl-tests 2.19.6 (NVIDIA/nccl-tests at
# a0b82b2, "NCCL_TESTS_VERSION 2.19.6") built against NCCL 2.28.9 (the nvidia-nccl-cu13 wheel) with CUDA
# 13.0 for sm_90, run once on one NVIDIA H200 with its -J JSON report beside the text it prints.
# NCCL_HOME: a folder with NCCL's include/ and lib/ (libnccl.so linked to the wheel's libnccl.so.2).
set -euo pipefail
: "${NCCL_HOME:?NCCL_HOME must name NCCL's include/ and lib/}"
make -C nccl-tests/src -j16 build BUILDDIR="$PWD/build" NCCL_HOME="$NCCL_HOME" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90"
name=all_reduce_perf-1xH200-g1-nccl2.28.9
LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}" \
    ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1 -J "$name.json" > "$name.txt" 2>&1
# The report lists the whole process environment: keep its NCCL_ and CUDA_VERSION entries (the image's
# NCCL_VERSION=2.28.3-1 is its apt package's, not the library that ran) and nothing of the machine's.
python3 - "$name.json" <<'PY'
import json, re, sys
path = sys.argv[1]
raw = open(path).read()
m = re.search(r'"env":(\[.*?\]),"nccl_version"', raw, re.S)
kept = [e for e in json.loads(m.group(1)) if e.startswith(("NCCL_", "CUDA_VERSION="))]
raw = raw[:m.start(1)] + "[" + ",".join(json.dumps(e).replace("/", "\\/") for e in kept) + "]" + raw[m.end(1):]
open(path, "w").write(raw)
PY
