// Probe kernels of benchmarks/exp_long_blocks.py (thirty-eighth session): the float64 sum
// of long lists one block each (indices from a list of them) and of short lists one per
// thread, in two launches or one. Templates: CuPy instantiates them by name.
template <int BLOCK, int UNROLL>
__device__ void long_role(const long long* __restrict__ offsets,
                          const double* __restrict__ content, double* __restrict__ out,
                          int list) {
    const long long s = offsets[list], e = offsets[list + 1];
    double acc = 0.0;
    long long a = (s + 1) & ~1LL, b = e & ~1LL;  // the 16-byte-aligned middle
    if (a >= b) {  // no whole vector: thread 0 takes every element
        a = b = e;
        if (threadIdx.x == 0) for (long long k = s; k < e; ++k) acc += content[k];
    } else {
        if (threadIdx.x == 0 && (s & 1)) acc += content[s];
        if (threadIdx.x == 1 && (e & 1)) acc += content[e - 1];
    }
    const double2* v = reinterpret_cast<const double2*>(content);
    long long i = a / 2 + threadIdx.x;
    const long long vend = b / 2;
    for (; i + (UNROLL - 1) * BLOCK < vend; i += UNROLL * BLOCK) {
        double2 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) r[u] = __ldg(v + i + u * BLOCK);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += r[u].x + r[u].y;
    }
    for (; i < vend; i += BLOCK) { double2 r = __ldg(v + i); acc += r.x + r.y; }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);
    __shared__ double part[BLOCK / 32];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
#pragma unroll
        for (int w = 0; w < BLOCK / 32; ++w) t += part[w];
        out[list] = t;
    }
}

template <int BLOCK>
__device__ void short_role(const long long* __restrict__ offsets,
                           const double* __restrict__ content, double* __restrict__ out,
                           long long n, long long longest_short, long long first) {
    long long list = first + threadIdx.x;
    if (list >= n) return;
    const long long s = offsets[list], e = offsets[list + 1];
    if (e - s > longest_short) return;
    double acc = 0.0;
    for (long long k = s; k < e; ++k) acc += content[k];
    out[list] = acc;
}

template <int BLOCK, int UNROLL>
__global__ void __launch_bounds__(BLOCK) long_sum(const long long* offsets, const double* content,
                                                  double* out, const int* long_lists) {
    long_role<BLOCK, UNROLL>(offsets, content, out, long_lists[blockIdx.x]);
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) short_sum(const long long* offsets, const double* content,
                                                   double* out, long long n,
                                                   long long longest_short) {
    short_role<BLOCK>(offsets, content, out, n, longest_short, (long long)blockIdx.x * BLOCK);
}

// one launch: the first n_long blocks take a long list each (longest first when the list
// is sorted so), the rest the short lists, BLOCK per block
template <int BLOCK, int UNROLL>
__global__ void __launch_bounds__(BLOCK) both_sum(const long long* offsets, const double* content,
                                                  double* out, const int* long_lists, int n_long,
                                                  long long n, long long longest_short) {
    if ((int)blockIdx.x < n_long) {
        long_role<BLOCK, UNROLL>(offsets, content, out, long_lists[blockIdx.x]);
    } else {
        short_role<BLOCK>(offsets, content, out, n, longest_short,
                          (long long)(blockIdx.x - n_long) * BLOCK);
    }
}
