"""What the cuDNN frontend on an FP8 GPU accepts, for the engine backend: fused FP8 convolution graphs
(per-channel descale, bias, residual add, activations, FP8 output), plan enumeration and timing per plan,
capture in a CUDA graph, and torch._scaled_mm with per-channel weight scales. Prints one line per check.

The `scaled` checks: whether an fp16 graph with a per-channel scale of one after the convolution (as an FP8 graph
descales) is offered cuDNN's runtime-fusion engines (eng4, eng7), which the plain fp16 graph of a grouped convolution
is not; on the H200 it is (`benchmarks/results/h200/scaled-fp16/cudnn-frontend-check.txt`, run with a 1024-channel
input), which is why the engine times that graph too (`builders.engine.conv_tactics.scaled_companion`).

Run on the GPU machine: python benchmarks/cudnn_frontend_check.py
"""

from __future__ import annotations

import time

import torch

from builders.engine.cudnn_library import import_cudnn


def conv_graph(cudnn, handle, n, c, h, k, r, groups, fp8_in, epilogue, fp8_out, scaled=False):
    dt = cudnn.data_type
    cg = c // groups
    g = cudnn.pygraph(io_data_type=dt.HALF, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT, handle=handle)
    in_type = dt.FP8_E4M3 if fp8_in else dt.HALF
    x = g.tensor(name="x", dim=[n, c, h, h], stride=[c * h * h, 1, h * c, c], data_type=in_type)
    w = g.tensor(name="w", dim=[k, cg, r, r], stride=[cg * r * r, 1, r * cg, cg], data_type=in_type)
    y = g.conv_fprop(image=x, weight=w, padding=[r // 2] * 2, stride=[1, 1], dilation=[1, 1],
                     compute_data_type=dt.FLOAT)
    t = {"x": x, "w": w}
    if fp8_in or scaled:
        t["descale"] = g.tensor(name="descale", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=dt.FLOAT)
        y = g.mul(a=y, b=t["descale"], compute_data_type=dt.FLOAT)
    t["bias"] = g.tensor(name="bias", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=dt.HALF)
    y = g.add(a=y, b=t["bias"], compute_data_type=dt.FLOAT)
    for op in epilogue:
        if op == "add":
            t["res"] = g.tensor(name="res", dim=[n, k, h, h], stride=[k * h * h, 1, h * k, k], data_type=dt.HALF)
            y = g.add(a=y, b=t["res"], compute_data_type=dt.FLOAT)
        elif op == "relu":
            y = g.relu(input=y, compute_data_type=dt.FLOAT)
        elif op == "swish":
            y = g.swish(input=y, compute_data_type=dt.FLOAT)
        else:
            y = getattr(g, op)(input=y, compute_data_type=dt.FLOAT)
    if fp8_out:
        t["qscale"] = g.tensor(name="qscale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt.FLOAT)
        y = g.mul(a=y, b=t["qscale"], compute_data_type=dt.FLOAT)
    y.set_output(True).set_data_type(dt.FP8_E4M3 if fp8_out else dt.HALF).set_dim([n, k, h, h]).set_stride(
        [k * h * h, 1, h * k, k])
    t["y"] = y
    return g, t


def tensors_for(t, n, c, h, k, r, groups, fp8_in, fp8_out):
    cl = torch.channels_last
    dev = "cuda"
    in_dtype = torch.float8_e4m3fn if fp8_in else torch.float16
    data = {
        "x": torch.randn(n, c, h, h, device=dev).to(in_dtype, memory_format=cl),
        "w": (torch.randn(k, c // groups, r, r, device=dev) * 0.1).to(in_dtype, memory_format=cl),
        "bias": torch.randn(1, k, 1, 1, device=dev, dtype=torch.float16),
        "y": torch.empty(n, k, h, h, device=dev, dtype=torch.float8_e4m3fn if fp8_out else torch.float16).to(
            memory_format=cl),
    }
    if "descale" in t:
        data["descale"] = torch.full((1, k, 1, 1), 0.01 if fp8_in else 1.0, device=dev)
    if "res" in t:
        data["res"] = torch.randn(n, k, h, h, device=dev, dtype=torch.float16).to(memory_format=cl)
    if "qscale" in t:
        data["qscale"] = torch.full((1, 1, 1, 1), 0.5, device=dev)
    return {t[name]: value for name, value in data.items()}


def check(cudnn, handle, label, **kw):
    shape = {key: kw[key] for key in ("n", "c", "h", "k", "r", "groups", "fp8_in", "fp8_out")}
    started = time.perf_counter()
    try:
        g, t = conv_graph(cudnn, handle, **kw)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        g.check_support()
        count = g.get_execution_plan_count()
    except Exception as exc:  # noqa: BLE001
        print(f"{label}: REFUSED {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return
    pack = tensors_for(t, **shape)
    times = []
    for index in range(min(count, 12)):
        t0 = time.perf_counter()
        try:
            g.build_plan_at_index(index)
            ws = torch.empty(max(g.get_workspace_size_plan_at_index(index), 1), dtype=torch.uint8, device="cuda")
            build_s = time.perf_counter() - t0
            cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
            for _ in range(3):
                g.execute_plan_at_index(pack, ws, index, handle=handle)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                g.execute_plan_at_index(pack, ws, index, handle=handle)
            end.record()
            torch.cuda.synchronize()
            times.append((start.elapsed_time(end) / 20 * 1e3, index, g.get_plan_name_at_index(index), build_s))
        except Exception as exc:  # noqa: BLE001
            times.append((float("inf"), index, f"FAILED {type(exc).__name__}: {' '.join(str(exc).split())[:120]}",
                          time.perf_counter() - t0))
    best = min(times)
    print(f"{label}: {count} plans, tried {len(times)} in {time.perf_counter() - started:.2f} s; "
          + "; ".join(f"[{i}] {us:.1f}us {name[:60]} ({b:.2f}s)" for us, i, name, b in times))
    if best[0] == float("inf"):
        return
    g.build_plan_at_index(best[1])
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
            g.execute(pack, ws, handle=handle)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
            g.execute(pack, ws, handle=handle)
        graph.replay()
        torch.cuda.synchronize()
        y = pack[t["y"]].float()
        print(f"   capture ok; output finite {bool(torch.isfinite(y).all())}, absmax {float(y.abs().max()):.3g}")
    except Exception as exc:  # noqa: BLE001
        print(f"   capture FAILED {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")


def scaled_mm_checks() -> None:
    m, k, n = 64, 256, 512
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    cases = {
        "per-tensor fp16 bias": {"scale_a": torch.tensor(0.5, device="cuda"),
                                 "scale_b": torch.tensor(0.5, device="cuda"),
                                 "bias": bias, "out_dtype": torch.float16},
        "rowwise fp16 bias": {"scale_a": torch.full((m, 1), 0.5, device="cuda"),
                              "scale_b": torch.full((1, n), 0.5, device="cuda"), "bias": bias,
                              "out_dtype": torch.float16},
        "rowwise bf16 bias": {"scale_a": torch.full((m, 1), 0.5, device="cuda"),
                              "scale_b": torch.full((1, n), 0.5, device="cuda"), "bias": bias.bfloat16(),
                              "out_dtype": torch.bfloat16},
        "rowwise bf16": {"scale_a": torch.full((m, 1), 0.5, device="cuda"),
                         "scale_b": torch.full((1, n), 0.5, device="cuda"),
                         "out_dtype": torch.bfloat16},
        "per-tensor fp8 out": {"scale_a": torch.tensor(0.5, device="cuda"), "scale_b": torch.tensor(0.5, device="cuda"),
                               "scale_result": torch.tensor(2.0, device="cuda"), "out_dtype": torch.float8_e4m3fn},
    }
    for label, kwargs in cases.items():
        try:
            out = torch._scaled_mm(a, b, **kwargs)
            torch.cuda.synchronize()
            print(f"_scaled_mm {label}: ok {out.dtype}")
        except Exception as exc:  # noqa: BLE001
            print(f"_scaled_mm {label}: REFUSED {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")


def main() -> None:
    cudnn = import_cudnn()
    handle = cudnn.create_handle()
    print("torch", torch.__version__, "cudnn", cudnn.backend_version(), torch.cuda.get_device_name(),
          torch.cuda.get_device_capability())
    base = {"n": 1, "c": 256, "h": 56, "k": 128, "r": 1, "groups": 1}
    check(cudnn, handle, "fp8 1x1 b1 +relu fp16out", **base, fp8_in=True, epilogue=["relu"], fp8_out=False)
    check(cudnn, handle, "fp8 1x1 b1 +add+relu fp8out", **base, fp8_in=True, epilogue=["add", "relu"], fp8_out=True)
    check(cudnn, handle, "fp8 1x1 b32 +add+relu fp8out", **{**base, "n": 32}, fp8_in=True, epilogue=["add", "relu"],
          fp8_out=True)
    check(cudnn, handle, "fp16 1x1 b32 +add+relu", **{**base, "n": 32}, fp8_in=False, epilogue=["add", "relu"],
          fp8_out=False)
    check(cudnn, handle, "fp8 3x3 b1 +sigmoid", **{**base, "r": 3}, fp8_in=True, epilogue=["sigmoid"], fp8_out=False)
    check(cudnn, handle, "fp8 3x3 b1 +swish fp8out", **{**base, "r": 3}, fp8_in=True, epilogue=["swish"], fp8_out=True)
    check(cudnn, handle, "fp8 3x3 b1 +gelu", **{**base, "r": 3}, fp8_in=True, epilogue=["gelu"], fp8_out=False)
    check(cudnn, handle, "fp8 3x3 g16(16/grp) b1 +relu fp8out", n=1, c=256, h=14, k=256, r=3, groups=16, fp8_in=True,
          epilogue=["relu"], fp8_out=True)
    check(cudnn, handle, "fp8 3x3 g64(4/grp) b1 +relu fp8out", n=1, c=256, h=28, k=256, r=3, groups=64, fp8_in=True,
          epilogue=["relu"], fp8_out=True)
    check(cudnn, handle, "fp16 3x3 g64 b1 +relu", n=1, c=256, h=28, k=256, r=3, groups=64, fp8_in=False,
          epilogue=["relu"], fp8_out=False)
    grouped = {"n": 1, "c": 512, "h": 14, "k": 1024, "r": 3, "groups": 64, "epilogue": ["relu"]}  # senet154 layer3
    for n in (1, 32):
        shape = {**grouped, "n": n}
        check(cudnn, handle, f"fp16 3x3 g64 b{n} 512->1024ch +relu", **shape, fp8_in=False, fp8_out=False)
        check(cudnn, handle, f"fp16 3x3 g64 b{n} 512->1024ch +relu scaled by ones", **shape, fp8_in=False,
              fp8_out=False, scaled=True)
        check(cudnn, handle, f"fp16 3x3 g64 b{n} 512->1024ch +relu fp8out", **shape, fp8_in=False, fp8_out=True)
    check(cudnn, handle, "fp8 1x1 SE 1x1 map +relu fp8out", n=1, c=256, h=1, k=16, r=1, groups=1, fp8_in=True,
          epilogue=["relu"], fp8_out=True)
    scaled_mm_checks()


if __name__ == "__main__":
    main()
