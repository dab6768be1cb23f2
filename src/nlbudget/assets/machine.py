"""The CPU a build runs on: its model, cores and the instruction sets that decide how fast the
book's arithmetic is (AVX2, AVX-512, native bfloat16, AMX), and a matrix product's speed.

Results files record `cpu()` (the "How to rerun" page shows it); `benchmarks/cpu.py` measures
`matmul_gflops` and scales the book's time to another CPU.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

#: The flags that matter here, as /proc/cpuinfo names them.
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
#: The matrix product the budgets are sized with: a 256-token window through one of SmolLM2's
#: MLP projections (256×576 by 576×1536).
SHAPE = (256, 576, 1536)


def cpu() -> dict:
    """{"model", "cores", "flags": {flag: bool}} (flags None where the OS does not say)."""
    model, flags = platform.processor() or platform.machine(), None
    info = Path("/proc/cpuinfo")
    if info.is_file():
        text = info.read_text(errors="replace")
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
            if key.strip() == "flags" and flags is None:
                flags = set(value.split())
    return {"model": model, "cores": os.cpu_count(),
            "flags": {f: (f in flags) if flags is not None else None for f in FLAGS},
            "isa": isa()}


#: Run with these set, PyTorch (ATen's kernels, MKL's and oneDNN's matrix products) uses AVX2
#: at most, even on a CPU with AVX-512 or AMX: the arithmetic of the reference CPU (GitHub's
#: runners). On the machine the book is built on this gives 69 GFLOPS float32 and 1.7 bfloat16
#: on one thread at `SHAPE`, the reference's own 69 and 1.8 (`benchmarks/cpu.py`).
AVX2_ONLY = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}


def isa() -> dict:
    """The vector instructions PyTorch uses here (`avx512`, `avx2`, …) and any of the
    `AVX2_ONLY` settings in force."""
    import torch

    return {"torch": torch.backends.cpu.get_cpu_capability().lower(),
            **{k: os.environ[k] for k in AVX2_ONLY if k in os.environ}}


def describe(c: dict) -> str:
    """One line: the model, cores and which of the flags it has."""
    have = [f for f, v in c.get("flags", {}).items() if v]
    used = c.get("isa", {}).get("torch")
    return (f"{c.get('model', '?')}, {c.get('cores', '?')} cores; "
            f"{', '.join(have) if have else 'none of ' + ', '.join(FLAGS)}"
            + (f"; PyTorch used {used.upper()}" if used else ""))


def matmul_gflops(dtype: str = "float32", threads: int = 1, shape=SHAPE,
                  seconds: float = 1.0) -> float:
    """GFLOPS of `shape`'s matrix product in `dtype` on `threads` CPU threads (the median of
    seven timed runs filling about `seconds`; a shared or throttled CPU varies by ±15 % between
    calls, so `benchmarks/cpu.py` takes the median of three calls)."""
    import torch

    m, k, n = shape
    dt = getattr(torch, dtype)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(m, k, generator=g).to(dt)
        b = torch.randn(k, n, generator=g).to(dt)
        for _ in range(3):
            a @ b  # warm up
        t0, reps = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.1:
            a @ b
            reps += 1
        per = max(1, int(reps * seconds / 0.1 / 7))
        laps = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(per):
                a @ b
            laps.append((time.perf_counter() - t) / per)
        laps.sort()
        return 2 * m * k * n / laps[len(laps) // 2] / 1e9
    finally:
        torch.set_num_threads(saved)
