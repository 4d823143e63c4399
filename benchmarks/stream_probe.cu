// Streaming-read probes for benchmarks/gpu_stream_probe.py: the float64 sum of a flat
// array by waves reading 16-byte vectors, under the load shapes the hybrid reduction
// kernel could take. CUDA only (a measuring tool, not part of the engine); one shape per
// compile, chosen by the defines below.
//
// PROBE_NV     16-byte vectors per lane per wave-tile (lanes interleaved: vector c of
//              lane l is the tile's vector c * 32 + l)
// PROBE_PIPE   1: the next tile's loads are issued before this tile is folded
// PROBE_L2     0, 128 or 256: the L2 prefetch-size hint on each load (ld .L2::128B/256B)
// PROBE_ASYNC  S > 0: the tiles come through an S-stage cp.async ring in shared memory
//              (each lane reads back only the vectors it copied, so no wave barrier)
// PROBE_BLOCK, PROBE_MINB   block size and launch bound
//
// probe_sum(src, nvec, out): wave w folds tiles w, w + waves, ... (one tile each when the
// grid covers them all) and writes its sum to out[w].

#ifndef PROBE_NV
#define PROBE_NV 8
#endif
#ifndef PROBE_PIPE
#define PROBE_PIPE 0
#endif
#ifndef PROBE_L2
#define PROBE_L2 0
#endif
#ifndef PROBE_ASYNC
#define PROBE_ASYNC 0
#endif
#ifndef PROBE_BLOCK
#define PROBE_BLOCK 128
#endif
#ifndef PROBE_MINB
#define PROBE_MINB 8
#endif

__device__ __forceinline__ double2 load16(const double2* __restrict__ p) {
  double2 v;
#if PROBE_L2 == 256
  asm("ld.global.nc.L2::256B.v2.f64 {%0, %1}, [%2];" : "=d"(v.x), "=d"(v.y) : "l"(p));
#elif PROBE_L2 == 128
  asm("ld.global.nc.L2::128B.v2.f64 {%0, %1}, [%2];" : "=d"(v.x), "=d"(v.y) : "l"(p));
#else
  v = __ldg(p);
#endif
  return v;
}

__device__ __forceinline__ void wave_store(double acc, double* out, long long w) {
  for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);
  if ((threadIdx.x & 31) == 0) out[w] = acc;
}

#if PROBE_ASYNC == 0
extern "C" __global__ void __launch_bounds__(PROBE_BLOCK, PROBE_MINB)
probe_sum(const double2* __restrict__ src, long long nvec, double* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const long long w = ((long long)blockIdx.x * PROBE_BLOCK + threadIdx.x) >> 5;
  const long long waves = ((long long)gridDim.x * PROBE_BLOCK) >> 5;
  const long long tv = 32LL * PROBE_NV;  // vectors per tile
  const long long ntiles = (nvec + tv - 1) / tv;
  double acc = 0.0;
  double2 u[PROBE_NV];
  long long t = w;
  if (t < ntiles) {
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) {
      const long long i = t * tv + c * 32 + lane;
      u[c] = i < nvec ? load16(src + i) : make_double2(0.0, 0.0);
    }
  }
  for (; t < ntiles; t += waves) {
#if PROBE_PIPE
    double2 nx[PROBE_NV];
    const long long tn = t + waves;
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) {
      const long long i = tn * tv + c * 32 + lane;
      nx[c] = (tn < ntiles && i < nvec) ? load16(src + i) : make_double2(0.0, 0.0);
    }
#endif
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) acc += u[c].x + u[c].y;
#if PROBE_PIPE
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) u[c] = nx[c];
#else
    const long long tn = t + waves;
    if (tn < ntiles) {
#pragma unroll
      for (int c = 0; c < PROBE_NV; ++c) {
        const long long i = tn * tv + c * 32 + lane;
        u[c] = i < nvec ? load16(src + i) : make_double2(0.0, 0.0);
      }
    }
#endif
  }
  wave_store(acc, out, w);
}
#else
__device__ __forceinline__ void copy16(double2* dst, const double2* src, bool ok) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(d), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

extern "C" __global__ void __launch_bounds__(PROBE_BLOCK, PROBE_MINB)
probe_sum(const double2* __restrict__ src, long long nvec, double* __restrict__ out) {
  constexpr int S = PROBE_ASYNC, TV = 32 * PROBE_NV;
  __shared__ double2 ring[PROBE_BLOCK / 32][S][TV];
  const int lane = threadIdx.x & 31, wb = threadIdx.x >> 5;
  const long long w = ((long long)blockIdx.x * PROBE_BLOCK + threadIdx.x) >> 5;
  const long long waves = ((long long)gridDim.x * PROBE_BLOCK) >> 5;
  const long long ntiles = (nvec + TV - 1) / TV;
  auto issue = [&](long long t, int slot) {
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) {
      const long long i = t * TV + c * 32 + lane;
      const bool ok = t < ntiles && i < nvec;
      copy16(&ring[wb][slot][c * 32 + lane], src + (ok ? i : 0), ok);
    }
    commit();
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(w + s * waves, s);
  double acc = 0.0;
  int slot = 0;
  for (long long t = w; t < ntiles; t += waves) {
    issue(t + (S - 1) * waves, (slot + S - 1) % S);
    wait_groups<S - 1>();
#pragma unroll
    for (int c = 0; c < PROBE_NV; ++c) {
      const double2 v = ring[wb][slot][c * 32 + lane];
      acc += v.x + v.y;
    }
    slot = (slot + 1) % S;
  }
  wait_groups<0>();
  wave_store(acc, out, w);
}
#endif
