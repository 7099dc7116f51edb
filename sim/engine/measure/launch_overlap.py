"""What a host-launched forward pays for kernel launches (H200, PyTorch + torch.compile).

vLLM runs a step of more tokens than max_cudagraph_capture_size (512) without a CUDA graph: the
torch.compile'd pieces launch their kernels from the host. On a Llama-3.1-70B TP8-shaped stack
(hidden 8192, 8 query heads + 1 KV head of 128 per rank, MLP 28672/8, bf16, L = 8 layers) this
prints, per token count, for the eager function and the torch.compile'd one:
  gpu_ms    GPU time of one forward (CUDA-graph replay: no launch cost)
  wall_ms   back-to-back host-launched forwards, per forward
  issue_ms  host time to issue one forward while the GPU is busy (the launch cost alone)
  kernels   kernels one forward launches (torch.profiler)
Run on the device: python3 launch_overlap.py > h200_launch_overlap.jsonl (results next to it).
"""
import json,time,torch,torch.nn.functional as F
from torch.profiler import profile,ProfilerActivity as PA
H,Q,D,I,L=8192,8,128,3584,8;dt=torch.bfloat16
def mk(*s):return torch.randn(*s,device='cuda',dtype=dt)*.02
P=[dict(a=mk((Q+2)*D,H),o=mk(H,Q*D),g=mk(2*I,H),d=mk(H,I),n=torch.ones(H,device='cuda',dtype=dt)) for _ in range(L)]
def rms(x,w):return (x.float()*torch.rsqrt(x.float().pow(2).mean(-1,keepdim=True)+1e-5)).to(dt)*w
def fw(x):
 T=x.shape[0]
 for p in P:
  q,k,v=(rms(x,p['n'])@p['a'].t()).split([Q*D,D,D],-1)
  a=F.scaled_dot_product_attention(q.view(T,Q,D).transpose(0,1),k.view(T,1,D).transpose(0,1).expand(Q,T,D),v.view(T,1,D).transpose(0,1).expand(Q,T,D),is_causal=True)
  x=x+a.transpose(0,1).reshape(T,Q*D)@p['o'].t()
  g,u=(rms(x,p['n'])@p['g'].t()).chunk(2,-1);x=x+(F.silu(g)*u)@p['d'].t()
 return x
cf=torch.compile(fw)
def me(n,f,x,r=10):
 for _ in range(3):f(x)
 torch.cuda.synchronize();g=torch.cuda.CUDAGraph();s=torch.cuda.Stream();s.wait_stream(torch.cuda.current_stream())
 with torch.cuda.stream(s):
  f(x)
  with torch.cuda.graph(g):f(x)
 torch.cuda.current_stream().wait_stream(s);torch.cuda.synchronize()
 e0,e1=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True);e0.record()
 for _ in range(r):g.replay()
 e1.record();torch.cuda.synchronize();gm=e0.elapsed_time(e1)/r
 t=time.perf_counter()
 for _ in range(r):f(x)
 torch.cuda.synchronize();wm=(time.perf_counter()-t)*1e3/r;iss=[]
 for _ in range(5):
  torch.cuda.synchronize();torch.cuda._sleep(int(1e9));t=time.perf_counter();f(x);iss.append((time.perf_counter()-t)*1e3);torch.cuda.synchronize()
 im=sorted(iss)[2]
 with profile(activities=[PA.CUDA]) as pr:
  f(x);torch.cuda.synchronize()
 k=sum(1 for e in pr.events() if e.device_type==torch.autograd.DeviceType.CUDA)
 print(json.dumps(dict(mode=n,tokens=x.shape[0],layers=L,gpu_ms=gm,wall_ms=wm,issue_ms=im,kernels=k,us_per_kernel=1e3*im/k)),flush=True)
with torch.inference_mode():
 for T in [16,256,512,513,1024,2048,4096,8192]:
  x=mk(T,H);me('eager',fw,x);me('compiled',cf,x)
