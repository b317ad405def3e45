// counter.cu: the device-side generation counter of the captured CUDA graphs (one module for
// every family, algorithms/core/plan.py counter_kernels): set it, advance it.
extern "C" __global__ void isles_set_i64(long long* p, const long long v) { *p = v; }
extern "C" __global__ void isles_add_i64(long long* p, const long long v) { *p += v; }
