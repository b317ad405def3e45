// cde_pairs.cu: the fused CDE pair reduction (algorithms/coevolution/cuda.py); IS_F32, objective.cuh and
// the problem's pair_cuda (PAY_KX, PAY_KY, pay_pair) precede.
// thread t in [0, I * NOUT): island t / NOUT, output t % NOUT; ROLE 0: x (max over the y rows),
// ROLE 1: y (-min over the x rows). NaN payoff -> the output is +inf and counted.
ISLES_DEV void pair_one(long long t, const T* tx, const T* ty, T* out, unsigned long long* nan_count,
                        int nx, int ny, int role) {
    const int nout = role == 0 ? nx : ny;
    const long long isl = t / nout;
    const int k = (int)(t % nout);
    const T* ax = tx + (isl * nx) * PAY_KX;
    const T* ay = ty + (isl * ny) * PAY_KY;
    bool nan_seen = false;
    T best;
    if (role == 0) {
        best = -T_INF;
        const T* mine = ax + (long long)k * PAY_KX;
        for (int j = 0; j < ny; ++j) {
            const T v = pay_pair(mine, ay + (long long)j * PAY_KY);
            if (v != v) nan_seen = true;
            else if (v > best) best = v;
        }
        out[t] = nan_seen ? T_INF : best;
    } else {
        best = T_INF;
        const T* mine = ay + (long long)k * PAY_KY;
        for (int i = 0; i < nx; ++i) {
            const T v = pay_pair(ax + (long long)i * PAY_KX, mine);
            if (v != v) nan_seen = true;
            else if (v < best) best = v;
        }
        out[t] = nan_seen ? T_INF : -best;
    }
    if (nan_seen) {
#ifdef ISLES_HOST_EMU
        *nan_count += 1ull;
#else
        atomicAdd(nan_count, 1ull);
#endif
    }
}

#ifdef ISLES_HOST_EMU
void isles_pairs(const T* tx, const T* ty, T* out, unsigned long long* nan_count, long long total,
                 int nx, int ny, int role) {
    for (long long t = 0; t < total; ++t) pair_one(t, tx, ty, out, nan_count, nx, ny, role);
}
#else
ISLES_KERNEL void isles_pairs(const T* tx, const T* ty, T* out, unsigned long long* nan_count,
                              long long total, int nx, int ny, int role) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < total) pair_one(t, tx, ty, out, nan_count, nx, ny, role);
}
#endif
