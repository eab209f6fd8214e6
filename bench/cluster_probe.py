#!/usr/bin/env python3
"""Probe thread-block cluster launches on the GPU (a check of the launch path Argus uses, before the GEMM):

a tiny hand-written PTX kernel records, per block, %ctaid.x, %ctaid.y, %cluster_ctarank, %clusterid.x,
%clusterid.y, %cluster_nctarank and a value its peer CTA wrote into its shared memory through mapa +
st.shared::cluster between two cluster barriers. Launched (1) with `.reqnctapercluster` in the PTX and
an ordinary cuLaunchKernel, (2) with cuLaunchKernelEx and the cluster-dimension attribute. Prints JSON.
`python bench/cluster_probe.py [--out DIR]`.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry probe(.param .u64 out)
{DIRECTIVE}
{
  .reg .b32 r<16>; .reg .b64 rd<4>; .reg .pred p<2>;
  .shared .align 4 .b32 slot;
  ld.param.u64 rd1, [out];
  cvta.to.global.u64 rd1, rd1;
  mov.u32 r1, %ctaid.x; mov.u32 r2, %ctaid.y; mov.u32 r3, %nctaid.x;
  mad.lo.u32 r4, r2, r3, r1;                   // linear block id
  mov.u32 r5, %cluster_ctarank; mov.u32 r6, %clusterid.x; mov.u32 r7, %clusterid.y;
  mov.u32 r8, %cluster_nctarank; mov.u32 r9, %tid.x;
  setp.ne.u32 p1, r9, 0;
  @p1 bra DONE0;
  st.shared.u32 [slot], 4294967295;
DONE0:
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @p1 bra DONE1;
  add.u32 r10, r5, 1;
  rem.u32 r10, r10, r8;                        // the next rank in the cluster
  mov.u32 r11, slot;
  mapa.shared::cluster.u32 r12, r11, r10;
  add.u32 r13, r4, 1000;                       // 1000 + my linear block id, into the peer's slot
  st.shared::cluster.u32 [r12], r13;
DONE1:
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  @p1 bra END;
  ld.shared.u32 r14, [slot];
  mul.wide.u32 rd2, r4, 32;
  add.u64 rd3, rd1, rd2;
  st.global.v4.u32 [rd3], {r1, r2, r5, r6};
  st.global.v4.u32 [rd3+16], {r7, r8, r14, r4};
END:
  ret;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    import torch

    from argus_verify.runtime.tma import _check, _driver

    torch.zeros(1, device="cuda")
    drv = _driver()
    gx, gy, cx = 8, 3, 2
    results = {}
    paths = (("reqnctapercluster+cuLaunchKernel", f".reqnctapercluster {cx}, 1, 1", False),
             ("explicitcluster+cuLaunchKernel", f".explicitcluster\n.reqnctapercluster {cx}, 1, 1", False),
             ("cuLaunchKernelEx(cluster attr)", "", True),
             ("reqnctapercluster+cuLaunchKernelEx", f".reqnctapercluster {cx}, 1, 1", True))
    for name, directive, ex in paths:
        try:
            mod = _check(drv.cuModuleLoadData(PTX.replace("{DIRECTIVE}", directive).encode() + b"\0"), "load")
            fn = _check(drv.cuModuleGetFunction(mod, b"probe"), "get")
            out = torch.full((gx * gy, 8), -1, dtype=torch.int32, device="cuda")
            arg = ctypes.c_uint64(int(out.data_ptr()))
            ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
            stream = torch.cuda.current_stream().cuda_stream
            if not ex:
                _check(drv.cuLaunchKernel(fn, gx, gy, 1, 32, 1, 1, 0, stream, ctypes.addressof(ptrs), 0), "launch")
            else:
                cfg = drv.CUlaunchConfig()
                cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, 1
                cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
                cfg.sharedMemBytes = 0
                try:
                    cfg.hStream = stream
                except TypeError:
                    cfg.hStream = drv.CUstream(int(stream))
                at = drv.CUlaunchAttribute()
                at.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z = cx, 1, 1
                cfg.attrs = [at]
                cfg.numAttrs = 1
                _check(drv.cuLaunchKernelEx(cfg, fn, ctypes.addressof(ptrs), 0), "cuLaunchKernelEx")
            torch.cuda.synchronize()
            o = out.cpu().numpy()
            rank_ok = bool(np.all(o[:, 2] == o[:, 0] % cx))  # %cluster_ctarank == ctaid.x % cluster x
            cid_ok = bool(np.all(o[:, 3] == o[:, 0] // cx) and np.all(o[:, 4] == o[:, 1]))
            peer = o[:, 3] * cx + (o[:, 2] + cx - 1) % cx + o[:, 1] * gx  # the rank before me wrote its id
            dsmem_ok = bool(np.all(o[:, 6] == 1000 + peer))
            results[name] = {"ok": rank_ok and cid_ok and dsmem_ok and bool(np.all(o[:, 5] == cx)),
                             "rank_is_ctaid_mod_cx": rank_ok, "clusterid_ok": cid_ok, "dsmem_ok": dsmem_ok,
                             "nctarank": sorted(set(o[:, 5].tolist())), "rows": o[:6].tolist()}
        except Exception as e:  # noqa: BLE001
            results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(name, json.dumps(results[name]), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cluster_probe.json").write_text(json.dumps(results, indent=1))
    return 0 if any(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
