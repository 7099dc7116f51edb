"""What a forward pass pays on the host vs the GPU, eager / torch.compile (no graphs) / CUDA graph.

A Llama-3.1-8B-shaped decoder layer (hidden 4096, 32 q heads, 8 kv heads, head 128, SwiGLU
14336, RMSNorm, bf16), 32 layers, one sequence of N new tokens attending causally to itself.
For each N: wall time of one forward (sync before and after), the host time to enqueue it
(return of the call, before sync), and the GPU time from CUDA-graph replay of the same work.
Counts kernels per layer with the profiler. Writes $OUT/forward_overhead.json.
"""
import json, os, time, statistics, datetime, subprocess
import torch, triton
import torch.nn.functional as F

torch.manual_seed(0)
dev = "cuda"
H, NQ, NKV, HD, FF, L = 4096, 32, 8, 128, 14336, 32
dt = torch.bfloat16

def mk(*s):
    return (torch.randn(*s, device=dev, dtype=dt) * 0.02)

layers = [dict(wqkv=mk((NQ + 2 * NKV) * HD, H), wo=mk(H, NQ * HD), wgu=mk(2 * FF, H), wd=mk(H, FF),
               n1=torch.ones(H, device=dev, dtype=dt), n2=torch.ones(H, device=dev, dtype=dt)) for _ in range(L)]

def rms(x, w):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + 1e-5)).to(dt) * w

def layer(x, p):
    n = x.shape[0]
    h = rms(x, p["n1"])
    qkv = h @ p["wqkv"].t()
    q, k, v = qkv.split([NQ * HD, NKV * HD, NKV * HD], dim=-1)
    q = q.view(n, NQ, HD).transpose(0, 1)
    k = k.view(n, NKV, HD).transpose(0, 1).repeat_interleave(NQ // NKV, 0)
    v = v.view(n, NKV, HD).transpose(0, 1).repeat_interleave(NQ // NKV, 0)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    a = a.transpose(0, 1).reshape(n, NQ * HD)
    x = x + a @ p["wo"].t()
    h = rms(x, p["n2"])
    gu = h @ p["wgu"].t()
    g, u = gu.chunk(2, dim=-1)
    x = x + (F.silu(g) * u) @ p["wd"].t()
    return x

def fwd_eager(x):
    for p in layers:
        x = layer(x, p)
    return x

layer_c = torch.compile(layer, dynamic=True)
def fwd_compiled(x):
    for p in layers:
        x = layer_c(x, p)
    return x

def timed(fn, x, reps=15):
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    walls, hosts = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        hosts.append((t1 - t0) * 1e6)
        walls.append((t2 - t0) * 1e6)
    return statistics.median(walls), statistics.median(hosts)

def graph_time(fn, x, reps=15):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(x)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    del g
    return statistics.median(ts)

def kernels_per_layer(fn, x):
    from torch.profiler import profile, ProfilerActivity
    fn(x); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x); torch.cuda.synchronize()
    n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return n / L

def tiny_launch_us(n=5000):
    a = torch.zeros(1, device=dev)
    for _ in range(100):
        a.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        a.add_(1)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / n

env = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__,
           cuda=torch.version.cuda, date=datetime.date.today().isoformat(),
           driver=subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip(),
           model_shape=dict(hidden=H, heads=NQ, kv_heads=NKV, head_dim=HD, intermediate=FF, layers=L, dtype="bf16"))
out = dict(env=env, tiny_eager_launch_us=tiny_launch_us(), points=[])
print(env, "tiny eager op launch us", out["tiny_eager_launch_us"], flush=True)
sizes = [1, 8, 64, 256, 512, 513, 768, 1024, 1536, 2048, 3072, 4096, 8192]
for i, n in enumerate(sizes):
    x = mk(n, H)
    we, he = timed(fwd_eager, x)
    wc, hc = timed(fwd_compiled, x)
    ge = graph_time(fwd_eager, x)
    gc = graph_time(fwd_compiled, x)
    pt = dict(tokens=n, eager_wall_us=we, eager_host_us=he, compiled_wall_us=wc, compiled_host_us=hc,
              eager_graph_gpu_us=ge, compiled_graph_gpu_us=gc)
    if n in (1, 1024):
        pt["eager_kernels_per_layer"] = kernels_per_layer(fwd_eager, x)
        pt["compiled_kernels_per_layer"] = kernels_per_layer(fwd_compiled, x)
    out["points"].append(pt)
    print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in pt.items()}), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "forward_overhead.json"), "w") as f:
        json.dump(out, f, indent=1)
