#!/usr/bin/env bash
# On the H200: CUPTI over several traced calls, the torch.profiler
# fallback, and groups / export on the result. Run through the device tool with carry [".whl"].
source "$(dirname "$0")/h200_setup.sh"
run run resnet18 --device cuda --variants fp16,fp8 --fp8-layout all --trace-calls 3 --out "$OUT/resnet18-3calls.json" 2>/dev/null
run run resnet18 --device cuda --variants fp16 --tracer torch --trace-calls 3 --out "$OUT/resnet18-torchprof.json" 2>/dev/null
run groups "$OUT/resnet18-3calls.json" --by kernel
run export "$OUT/resnet18-3calls.json" --sections comparison,method
python3 - "$OUT/resnet18-3calls.json" <<'PY'
import sys, orjson
d = orjson.loads(open(sys.argv[1], "rb").read())
for v in d["variants"]:
    t = v["trace"]
    print(v["name"], "calls", t["calls"], "records", t["records"], "per call", t["records"] / t["calls"],
          "calls seen", sorted(set(v["kernels"]["call"])), "outside", t["unattributed"], "note", repr(t["note"]))
PY
