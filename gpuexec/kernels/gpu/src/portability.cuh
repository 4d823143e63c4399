// gpuexec portability header: the only place where CUDA and HIP differ in kernel code.
//
// Compiles unchanged with NVRTC, nvcc (-arch=sm_90), hiprtc and hipcc (--offload-arch=gfx90a).
// Rules it encodes (see the porting checklist): the wave width comes from warpSize, never a
// literal; lane masks are 64 bits wide; CUDA uses the _sync shuffles; block sizes are
// multiples of 64 (checked at compile time with GK_BLOCK).
#pragma once

#if defined(__HIPCC__) || defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)
#define GK_HIP 1
#if !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
#else
#define GK_CUDA 1
#endif

#ifndef GK_BLOCK
#define GK_BLOCK 256
#endif
static_assert(GK_BLOCK % 64 == 0, "block sizes must be multiples of 64 (one or more full AMD wavefronts)");

// Launch bounds: CUDA's second argument is the minimum resident blocks per SM (caps
// registers so that GK_MIN_BLOCKS blocks fit); HIP's second argument means waves per EU,
// a different unit, so HIP gets the thread bound alone.
#ifndef GK_MIN_BLOCKS
#define GK_MIN_BLOCKS 4
#endif
#if defined(GK_HIP)
#define GK_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#else
#define GK_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#endif

// Narrowest wave any supported device has (NVIDIA warps, RDNA wave32). Only used to size
// per-wave scratch arrays from above; the real width is always read from warpSize.
#define GK_MIN_WAVE_WIDTH 32
#define GK_MAX_WAVES (GK_BLOCK / GK_MIN_WAVE_WIDTH)

typedef long long gk_i64;
typedef unsigned long long gk_u64;
// Lane masks are 64 bits on every vendor (a 32-bit mask drops half of a 64-lane wavefront).
typedef unsigned long long gk_lanemask_t;

__device__ __forceinline__ int gk_wave_width() { return warpSize; }
__device__ __forceinline__ int gk_lane() { return (int)(threadIdx.x % (unsigned)warpSize); }
__device__ __forceinline__ int gk_wave() { return (int)(threadIdx.x / (unsigned)warpSize); }

#if defined(GK_CUDA)
// All lanes of the current warp, as the 32-bit mask CUDA's _sync intrinsics take.
__device__ __forceinline__ unsigned gk_sync_mask() { return __activemask(); }
template <class V>
__device__ __forceinline__ V gk_shfl_up(V v, int delta) {
  return __shfl_up_sync(gk_sync_mask(), v, (unsigned)delta);
}
template <class V>
__device__ __forceinline__ V gk_shfl_down(V v, int delta) {
  return __shfl_down_sync(gk_sync_mask(), v, (unsigned)delta);
}
template <class V>
__device__ __forceinline__ V gk_shfl(V v, int lane) {
  return __shfl_sync(gk_sync_mask(), v, lane);
}
__device__ __forceinline__ gk_lanemask_t gk_ballot(int pred) {
  return (gk_lanemask_t)__ballot_sync(gk_sync_mask(), pred);
}
#else
template <class V>
__device__ __forceinline__ V gk_shfl_up(V v, int delta) { return __shfl_up(v, (unsigned)delta); }
template <class V>
__device__ __forceinline__ V gk_shfl_down(V v, int delta) { return __shfl_down(v, (unsigned)delta); }
template <class V>
__device__ __forceinline__ V gk_shfl(V v, int lane) { return __shfl(v, lane); }
__device__ __forceinline__ gk_lanemask_t gk_ballot(int pred) { return (gk_lanemask_t)__ballot(pred); }
#endif

// The lanes of one wave wait for each other, and their shared-memory writes before it are
// seen by the others after it (a wave-wide barrier where the waves of a block diverge).
// NVIDIA: __syncwarp. AMD: no __syncwarp in every ROCm; a wave-scope fence around a wave
// barrier (the wave runs in lockstep: the barrier only keeps the compiler from moving
// shared-memory accesses across it).
__device__ __forceinline__ void gk_wave_sync() {
#if defined(GK_CUDA)
  __syncwarp(gk_sync_mask());
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#endif
}

// Ask for a cache line to be brought into L2 ahead of its use (no register is held while it
// is in flight, unlike a load). NVIDIA: prefetch.global.L2. AMD gfx9 has no such
// instruction; there it is a no-op and the register double buffering does the work alone.
__device__ __forceinline__ void gk_prefetch_l2(const void* p) {
#if defined(GK_CUDA)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// Block-wide count of threads whose predicate holds (also a barrier).
__device__ __forceinline__ int gk_syncthreads_count(int pred) { return __syncthreads_count(pred); }

// 128-bit vector load. A 16-byte aligned struct makes NVCC emit LDG.E.128 and the AMDGPU
// backend global_load_dwordx4; GK_VEC_BYTES = 8 gives 64-bit loads for strategies that
// do not promise 128-bit ones.
#ifndef GK_VEC_BYTES
#define GK_VEC_BYTES 16
#endif
struct alignas(16) gk_vec16 { gk_u64 lo, hi; };
struct alignas(8) gk_vec8 { gk_u64 lo; };
#if GK_VEC_BYTES == 16
typedef gk_vec16 gk_vec_t;
#elif GK_VEC_BYTES == 8
typedef gk_vec8 gk_vec_t;
#else
#error "GK_VEC_BYTES must be 8 or 16"
#endif

template <class T>
union gk_vec_view {
  gk_vec_t v;
  T e[GK_VEC_BYTES / sizeof(T)];
};
// always 128 bits, whatever GK_VEC_BYTES a unit compiles with
template <class T>
union gk_vec_view16 {
  gk_vec16 v;
  T e[16 / sizeof(T)];
};

// Bit-level casts (kernel arguments carry identities as raw 64-bit patterns).
template <class T>
__device__ __forceinline__ T gk_from_bits(gk_u64 bits) {
  union { gk_u64 u; T t; } x;
  x.u = bits;
  return x.t;
}

template <class T> __device__ __forceinline__ bool gk_isnan(T) { return false; }
template <> __device__ __forceinline__ bool gk_isnan<float>(float x) { return x != x; }
template <> __device__ __forceinline__ bool gk_isnan<double>(double x) { return x != x; }
