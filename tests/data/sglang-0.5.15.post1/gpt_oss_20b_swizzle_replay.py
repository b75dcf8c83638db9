"""Replay of gpt-oss-20b weight loading on an H200, recorded 2026-12-01 by weights2 for specs/weights.py::
MXFP4_SWIZZLE_ALLOCATOR_RESIDUE. Not a test. Allocates the tensors of models/gpt_oss.py@0.5.15.post1 in its
order (embed, per layer qkv/o/sinks/rope/experts/router/norms, norm, lm_head), fills the float ones as
DummyModelLoader does, then runs Mxfp4MoEMethod.process_weights_after_loading's triton_kernels branch per
layer ("real"; "none" = only the fp32 biases). Run on the device with triton_kernels unpacked from the
sglang-kernel 0.4.4 wheel into /tmp/tk (python3 -m zipfile -e sglang_kernel-0.4.4-*.whl /tmp/tk).
Output (torch 2.11.0+cu130, triton 3.6.0): gpt_oss_20b_swizzle_replay.txt."""
import json
import sys

import torch

sys.path.insert(0, "/tmp/tk")
GIB = 1 << 30
dev = "cuda"
torch.cuda.init(); torch.zeros(1, device=dev)
def free():
    torch.cuda.synchronize(); torch.cuda.empty_cache(); return torch.cuda.mem_get_info()[0] / GIB
try:
    from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details import layout
    TK = True
except Exception as e:  # noqa
    print("triton_kernels import failed:", repr(e)); TK = False
mode = sys.argv[1] if len(sys.argv) > 1 else "real"
E, H, I, V, L = 32, 2880, 2880, 201088, 24
nq, nkv, hd = 64, 8, 64
bf = torch.bfloat16
res = {}
b0 = free()
class M: pass
params = []
def P(*shape, dtype=bf, zeros=False):
    t = (torch.zeros if zeros else torch.empty)(*shape, dtype=dtype, device=dev); params.append(t); return t
embed = P(V, H)
layers = []
rope = None
for _i in range(L):
    m = M()
    m.qkv = P((nq + 2 * nkv) * hd, H); m.qkvb = P((nq + 2 * nkv) * hd); m.sinks = P(nq)
    m.o = P(H, nq * hd); m.ob = P(H)
    if rope is None:
        inv = 1.0 / (150000 ** (torch.arange(0, hd, 2, dtype=torch.float, device=dev) / hd))
        t = torch.arange(4096 * 32, dtype=torch.float, device=dev)
        fr = torch.einsum("i,j->ij", t, inv); rope = torch.cat((fr.cos(), fr.sin()), dim=-1)
        del inv, t, fr
    m.w13 = P(E, 2 * I, H // 2, dtype=torch.uint8, zeros=True); m.w13s = P(E, 2 * I, H // 32, dtype=torch.uint8, zeros=True)
    m.w13b = P(E, 2 * I, zeros=True)
    m.w2 = P(E, H, I // 2, dtype=torch.uint8, zeros=True); m.w2s = P(E, H, I // 32, dtype=torch.uint8, zeros=True)
    m.w2b = P(E, H, zeros=True)
    m.router = P(E, H); m.routerb = P(E); m.ln1 = P(H); m.ln2 = P(H)
    layers.append(m)
norm = P(H); lm_head = P(V, H)
for p in params:
    if torch.is_floating_point(p):
        g = torch.Generator(device=dev); g.manual_seed(1234); p.uniform_(-1e-3, 1e-3, generator=g)
params.clear()
res["after_init_gib"] = b0 - free()
res["allocated_after_init_gib"] = torch.cuda.memory_allocated() / GIB
def swz(q, s):
    q = q.transpose(-2, -1); s = s.transpose(-2, -1)
    vl, vo = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
    sl, so = layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8)
    q = convert_layout(wrap_torch_tensor(q, dtype=FP4), vl, **vo)
    s = convert_layout(wrap_torch_tensor(s), sl, **so)
    return q, s
for m in layers:
    m.w13b = m.w13b.to(torch.float32); m.w2b = m.w2b.to(torch.float32)
    if mode == "real":
        a, a_s = swz(m.w13, m.w13s); b, b_s = swz(m.w2, m.w2s)
        m.tt = (a, a_s, b, b_s)
        res.setdefault("swizzled_shapes", [tuple(a.storage.data.shape), tuple(a_s.storage.data.shape),
                                            tuple(b.storage.data.shape), tuple(b_s.storage.data.shape)])
        del m.w13, m.w2
    torch.cuda.empty_cache()
res["after_process_gib"] = b0 - free()
res["allocated_gib"] = torch.cuda.memory_allocated() / GIB
res["reserved_gib"] = torch.cuda.memory_reserved() / GIB
st = torch.cuda.memory_stats()
res["segments"] = st.get("segment.all.current"); res["inactive_split_gib"] = st.get("inactive_split_bytes.all.current", 0) / GIB
print(json.dumps(res, indent=1, default=str))
