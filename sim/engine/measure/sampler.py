"""What vLLM's sampler costs per engine step (H200, PyTorch), by batch, vocabulary and sampling mode.

After the forward (a CUDA graph for a uniform decode), vLLM v1's `Sampler` runs eagerly on the
step's logits: float32 cast, temperature, then (`TopKTopPSampler.forward_native`, the default
unless VLLM_USE_FLASHINFER_SAMPLER=1) top-k alone with `torch.topk` (`apply_top_k_only`), or
top-p (with or without top-k) over a full sort of the vocabulary (`apply_top_k_top_p`), then
`random_sample`: softmax, an exponential draw per logit, argmax of probs / q. Greedy requests
(temperature 0) take argmax of the float logits. The functions below are those, written out
with the same PyTorch ops.

Per (mode, vocab, batch) it records:
  gpu_us      GPU time per sampler call, CUDA-graph replay (triton do_bench_cudagraph), logits in
              L2 (one buffer: the LM head has just written them)
  gpu_cold_us the same with the logits rotated over buffers of 4x the L2 size
  eager_us    back-to-back eager calls (triton do_bench): launches included
  issue_us    host time to issue one call while the GPU is busy (the launch cost alone)
and, once per mode, the kernels one call launches (torch.profiler).
Run on the device: python3 sampler.py > $OUT/h200_sampler.jsonl
"""
import datetime, json, os, subprocess, sys, time

import torch
import triton
from torch.profiler import ProfilerActivity, profile

dev = torch.device("cuda")
TEMP, TOP_K, TOP_P = 0.7, 40, 0.95


def apply_top_k_only(logits, k, max_top_k):
    # vllm/v1/sample/ops/topk_topp_sampler.py: max_top_k = k.max() there (a host sync); passed in here
    # so the call can be captured in a graph.
    no_top_k_mask = k == logits.shape[1]
    k = k.masked_fill(no_top_k_mask, 1)
    k_index = (k - 1).unsqueeze(1)
    top_k_mask = logits.topk(max_top_k, dim=1).values.gather(1, k_index.long())
    top_k_mask.masked_fill_(no_top_k_mask.unsqueeze(1), -float("inf"))
    logits.masked_fill_(logits < top_k_mask, -float("inf"))
    return logits


def apply_top_k_top_p(logits, k, p):
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        logits_sort.masked_fill_(logits_sort < top_k_mask, -float("inf"))
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    top_p_mask[:, -1] = False
    logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)


def random_sample(probs):
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)


def make(mode, B):
    temp = torch.full((B,), TEMP, device=dev)
    k = torch.full((B,), TOP_K, device=dev, dtype=torch.int32)
    p = torch.full((B,), TOP_P, device=dev)

    def sampler(x):
        logits = x.to(torch.float32)
        if mode == "greedy":
            return logits.argmax(dim=-1).view(-1)
        logits = logits.div_(temp.unsqueeze(1))
        if mode == "top_k":
            logits = apply_top_k_only(logits, k, TOP_K)
        elif mode == "top_p":
            logits = apply_top_k_top_p(logits, None, p)
        elif mode == "top_k_top_p":
            logits = apply_top_k_top_p(logits, k, p)
        return random_sample(logits.softmax(dim=-1, dtype=torch.float32))

    return sampler


def issue_us(f, x, n=5):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(5e7))
        t = time.perf_counter()
        f(x)
        out.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
    return sorted(out)[n // 2]


def kernels(f, x):
    with profile(activities=[ProfilerActivity.CUDA]) as pr:
        f(x)
        torch.cuda.synchronize()
    return sum(1 for e in pr.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main():
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    print(json.dumps(dict(env=dict(gpu=props.name, driver=drv, torch=torch.__version__, triton=triton.__version__,
                                   cuda=torch.version.cuda, l2_bytes=l2,
                                   date=datetime.date.today().isoformat()))), flush=True)
    vocabs = [int(v) for v in os.environ.get("VOCABS", "128256,151936,163840,200064,201088").split(",")]
    batches = [int(b) for b in os.environ.get("BATCHES", "1,2,4,8,16,32,64,128,256,512,1024").split(",")]
    modes = ["greedy", "random", "top_k", "top_p", "top_k_top_p"]
    with torch.inference_mode():
        for mode in modes:
            x = torch.randn(64, 200064, device=dev, dtype=torch.bfloat16)
            print(json.dumps(dict(mode=mode, vocab=200064, batch=64, kernels=kernels(make(mode, 64), x))), flush=True)
        for V in vocabs:
            for B in batches:
                hot = torch.randn(B, V, device=dev, dtype=torch.bfloat16)
                nbuf = max(2, int(4 * l2 // (B * V * 2)) + 1)
                nbuf = min(nbuf, 64)
                cold = [torch.randn(B, V, device=dev, dtype=torch.bfloat16) for _ in range(nbuf)]
                for mode in modes:
                    f = make(mode, B)
                    i = [0]

                    def rot():
                        i[0] = (i[0] + 1) % nbuf
                        return f(cold[i[0]])

                    row = dict(mode=mode, vocab=V, batch=B)
                    row["gpu_us"] = 1e3 * triton.testing.do_bench_cudagraph(lambda: f(hot), rep=40)
                    row["gpu_cold_us"] = 1e3 * triton.testing.do_bench_cudagraph(rot, rep=40)
                    row["eager_us"] = 1e3 * triton.testing.do_bench(lambda: f(hot), warmup=10, rep=40)
                    row["issue_us"] = issue_us(f, hot)
                    print(json.dumps(row), flush=True)
                del hot, cold
                torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
