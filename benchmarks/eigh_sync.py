"""Whether CuPy's batched ``eigh`` makes the host wait for the device (CMA-ES on the GPU, issue 28).

A 0.5 s spin kernel is queued, then one ``cupy.linalg.eigh`` of 16 symmetric ``n x n`` matrices is
called; the host's time in the call tells whether it waited for the spin (a synchronisation inside
a generation). Measured on one H100 (CuPy 14.2): 0.000 s at n = 16, 32, 33 and 64, **0.508 s at n = 100**.

    python benchmarks/eigh_sync.py
"""

import time

import cupy as cp
import numpy as np

SPIN = r"""extern "C" __global__ void spin(long long ns){unsigned long long t0,t;
asm volatile("mov.u64 %0, %%globaltimer;":"=l"(t0));
do{asm volatile("mov.u64 %0, %%globaltimer;":"=l"(t));}while(t-t0<(unsigned long long)ns);}"""


def main() -> None:
    """One line per matrix size: the host's wait in one batched ``eigh`` behind a 0.5 s spin."""
    spin = cp.RawKernel(SPIN, "spin")
    for n in (16, 32, 33, 64, 100):
        a = cp.asarray(np.random.default_rng(0).standard_normal((16, n, n)))
        c = a @ a.transpose(0, 2, 1)
        cp.linalg.eigh(c)  # warm-up: handles, workspace
        cp.cuda.Device().synchronize()
        spin((1,), (1,), (np.int64(500_000_000),))
        t0 = time.perf_counter()
        cp.linalg.eigh(c)
        print(f"eigh of 16 x ({n}, {n}): the host waited {time.perf_counter() - t0:.3f} s (0.5 s spin queued)")
        cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
