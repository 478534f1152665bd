"""Made here, not on the device: per session, per role the engine's fp16 and each FP8 build's layers with the library
that runs them (`attrs["library"]`), their summed traced time, and (layers matched by name) how many of a build's
FP8 layers traced slower than the same layer of the engine's fp16 build in the same session.

    python benchmarks/results/h200/graph-timed/recipes/pointwise_compare.py SESSION.json ...
"""
import sys
from collections import Counter, defaultdict

from sessions.analyses.groups import builtin_rules, role_of
from sessions.documents.storage import load

rules = builtin_rules()
for path in sys.argv[1:]:
    session = load(path)
    print(f"== {path.rsplit('/', 1)[-1]}")
    fp16 = next(v for v in session.variants if v.name == "cudnn-fp16")
    ref = {layer.name: layer for layer in fp16.layers}
    for variant in [v for v in session.variants if v.backend == "cudnn"]:
        by_role = defaultdict(list)
        for layer in variant.layers:
            if layer.op in ("conv", "linear") or layer.attrs.get("library"):
                by_role[role_of(layer, rules)].append(layer)
        for role, layers in sorted(by_role.items()):
            libs = Counter(f"{x.attrs.get('library', '-')} {x.precision}" for x in layers)
            ms = sum(x.time_ms or 0 for x in layers)
            fp8 = [x for x in layers if x.precision == "fp8"]
            slower = [x for x in fp8 if x.name in ref and (x.time_ms or 0) > (ref[x.name].time_ms or 0)]
            extra = ""
            if variant is not fp16 and fp8:
                d = sum((x.time_ms or 0) - (ref[x.name].time_ms or 0) for x in slower)
                extra = f"; FP8 layers slower than the engine's fp16 layer: {len(slower)} of {len(fp8)} (+{d:.3f} ms)"
            print(f"  {variant.name:<31} {role:<28} {len(layers):>3} layers {ms:7.3f} ms  "
                  + ", ".join(f"{k} {n}" for k, n in sorted(libs.items())) + extra)
