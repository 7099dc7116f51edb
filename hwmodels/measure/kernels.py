"""Single-launch Triton kernels for the memory-bound ops of a serving step, the way serving
engines fuse them (one kernel per op), each with a plain PyTorch reference that the
measurement script checks it against before timing."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(X, W, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gated_rmsnorm_kernel(X, Z, W, Y, N, G, eps, BLOCK: tl.constexpr):
    # Mamba-2 mixer output norm (norm_before_gate=False): y = rmsnorm_group(x * silu(z)) * w
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    mask = cols < G
    off = row * N + grp * G + cols
    x = tl.load(X + off, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(Z + off, mask=mask, other=0.0).to(tl.float32)
    x = x * z * tl.sigmoid(z)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / G + eps)
    w = tl.load(W + grp * G + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + off, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _silu_mul_kernel(X, Y, I, BLOCK: tl.constexpr):
    # X (T, 2I) = [gate | up] -> Y (T, I) = silu(gate) * up
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(X + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(X + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * I + cols, (g * tl.sigmoid(g) * u).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _relu2_kernel(X, Y, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.maximum(tl.load(X + offs, mask=mask, other=0.0).to(tl.float32), 0.0)
    tl.store(Y + offs, (x * x).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _add_kernel(A, B, Y, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + offs, (a + b).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softplus_dt_kernel(DT, BIAS, Y, numel, NH, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(DT + offs, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(BIAS + (offs % NH), mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _conv_prefill_kernel(X, W, BIAS, Y, L, C, K: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr):
    # depthwise causal conv + SiLU, channels-last: X, Y (B, L, C); W (C, K); BIAS (C)
    b = tl.program_id(2).to(tl.int64)
    ls = tl.program_id(0) * BLOCK_L + tl.arange(0, BLOCK_L)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    base = b * L * C
    acc = tl.zeros((BLOCK_L, BLOCK_C), dtype=tl.float32)
    acc += tl.load(BIAS + cs, mask=cmask, other=0.0).to(tl.float32)[None, :]
    for k in tl.static_range(K):
        t = ls - (K - 1) + k
        m = ((t >= 0) & (t < L))[:, None] & cmask[None, :]
        x = tl.load(X + base + t.to(tl.int64)[:, None] * C + cs[None, :], mask=m, other=0.0).to(tl.float32)
        wk = tl.load(W + cs * K + k, mask=cmask, other=0.0).to(tl.float32)
        acc += x * wk[None, :]
    y = acc * tl.sigmoid(acc)
    om = (ls < L)[:, None] & cmask[None, :]
    tl.store(Y + base + ls.to(tl.int64)[:, None] * C + cs[None, :], y.to(Y.dtype.element_ty), mask=om)


@triton.jit
def _conv_update_kernel(X, S, W, BIAS, Y, C, BLOCK_C: tl.constexpr):
    # one decode token, kernel width 4: S (B, 3, C) rolling state updated in place
    b = tl.program_id(1).to(tl.int64)
    cs = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = cs < C
    sb = S + b * 3 * C + cs
    s0 = tl.load(sb, mask=m, other=0.0)
    s1 = tl.load(sb + C, mask=m, other=0.0)
    s2 = tl.load(sb + 2 * C, mask=m, other=0.0)
    x = tl.load(X + b * C + cs, mask=m, other=0.0)
    acc = tl.load(BIAS + cs, mask=m, other=0.0).to(tl.float32)
    acc += s0.to(tl.float32) * tl.load(W + cs * 4 + 0, mask=m, other=0.0).to(tl.float32)
    acc += s1.to(tl.float32) * tl.load(W + cs * 4 + 1, mask=m, other=0.0).to(tl.float32)
    acc += s2.to(tl.float32) * tl.load(W + cs * 4 + 2, mask=m, other=0.0).to(tl.float32)
    acc += x.to(tl.float32) * tl.load(W + cs * 4 + 3, mask=m, other=0.0).to(tl.float32)
    tl.store(sb, s1, mask=m)
    tl.store(sb + C, s2, mask=m)
    tl.store(sb + 2 * C, x, mask=m)
    tl.store(Y + b * C + cs, (acc * tl.sigmoid(acc)).to(Y.dtype.element_ty), mask=m)


EW_BLOCK = 2048


def rmsnorm(x, w, y, eps=1e-5):
    n = x.shape[-1]
    _rmsnorm_kernel[(x.shape[0],)](x, w, y, n, eps, BLOCK=triton.next_power_of_2(n), num_warps=8)


def gated_rmsnorm(x, z, w, y, group, eps=1e-5):
    n = x.shape[-1]
    _gated_rmsnorm_kernel[(x.shape[0], n // group)](x, z, w, y, n, group, eps,
                                                    BLOCK=triton.next_power_of_2(group), num_warps=4)


def silu_mul(x, y):
    i = y.shape[-1]
    _silu_mul_kernel[(x.shape[0], triton.cdiv(i, 1024))](x, y, i, BLOCK=1024, num_warps=4)


def relu2(x, y):
    _relu2_kernel[(triton.cdiv(x.numel(), EW_BLOCK),)](x, y, x.numel(), BLOCK=EW_BLOCK, num_warps=8)


def residual_add(a, b, y):
    _add_kernel[(triton.cdiv(a.numel(), EW_BLOCK),)](a, b, y, a.numel(), BLOCK=EW_BLOCK, num_warps=8)


def softplus_dt(dt, bias, y):
    _softplus_dt_kernel[(triton.cdiv(dt.numel(), EW_BLOCK),)](dt, bias, y, dt.numel(), dt.shape[-1],
                                                              BLOCK=EW_BLOCK, num_warps=8)


def conv_prefill(x, w, bias, y):
    bsz, l, c = x.shape
    grid = (triton.cdiv(l, 64), triton.cdiv(c, 128), bsz)
    _conv_prefill_kernel[grid](x, w, bias, y, l, c, K=w.shape[1], BLOCK_L=64, BLOCK_C=128, num_warps=4)


def conv_update(x, state, w, bias, y):
    bsz, c = x.shape
    assert w.shape[1] == 4 and state.shape[1] == 3
    _conv_update_kernel[(triton.cdiv(c, 256), bsz)](x, state, w, bias, y, c, BLOCK_C=256, num_warps=4)


# ---- references (PyTorch, float32) ----
def ref_rmsnorm(x, w, eps=1e-5):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def ref_gated_rmsnorm(x, z, w, group, eps=1e-5):
    g = (x.float() * F.silu(z.float()))
    gs = g.view(g.shape[0], -1, group)
    gs = gs * torch.rsqrt(gs.pow(2).mean(-1, keepdim=True) + eps)
    return gs.view_as(g) * w.float()


def ref_silu_mul(x):
    i = x.shape[-1] // 2
    return F.silu(x[:, :i].float()) * x[:, i:].float()


def ref_relu2(x):
    return F.relu(x.float()) ** 2


def ref_softplus_dt(dt, bias):
    return F.softplus(dt.float() + bias.float())


def ref_conv_prefill(x, w, bias):
    bsz, l, c = x.shape
    k = w.shape[1]
    out = F.conv1d(x.float().transpose(1, 2), w.float().unsqueeze(1), bias.float(), padding=k - 1, groups=c)
    return F.silu(out[..., :l]).transpose(1, 2)


def ref_conv_update(x, state, w, bias):
    full = torch.cat([state.float(), x.float().unsqueeze(1)], dim=1)      # (B, 4, C)
    out = F.silu((full * w.float().t().unsqueeze(0)).sum(1) + bias.float())
    return out, full[:, 1:, :]


def rel_err(out, ref):
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))
