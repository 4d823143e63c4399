// Segmented reductions over the innermost lists of a jagged array, one portable source for
// CUDA and HIP: the kernels by list-length class in reduce_*.cuh (docs/gpu-reduction.md).
// A compile unit selects one op (GK_OP_<NAME>) and one strategy (GK_VARIANT_*).

#include "portability.cuh"

#define GK_LB GK_LAUNCH_BOUNDS(GK_BLOCK, GK_MIN_BLOCKS)

#include "reduce_ops.cuh"
#include "reduce_flat_walk.cuh"
#include "reduce_flat_split.cuh"
#include "reduce_flat_fused.cuh"
#include "reduce_per_thread.cuh"
#include "reduce_per_thread_staged.cuh"
#include "reduce_wave_stream.cuh"
#include "reduce_per_wave_staged.cuh"
#include "reduce_long_tail.cuh"
#include "reduce_per_wave.cuh"

// extern "C" entry points: gk_<op>_<dtype>_<kernel>
#if defined(GK_VARIANT_SPLIT)
#if !defined(GK_OP_COUNT)
extern "C" __global__ void GK_LB gk_partition(const gk_i64* off, gk_i64 n, gk_i64 shift, gk_i64 E,
                                             gk_i64 ntiles, gk_i64 R, gk_i64* P) {
  gk::partition_body(off, n, shift, E, ntiles, R, P);
}
#endif
#define GK_EMIT(OPN, DT, OP, T) GK_EMIT_FLAT_SPLIT(OPN, DT, OP, T)
#elif defined(GK_VARIANT_FUSED)
#define GK_EMIT(OPN, DT, OP, T) GK_EMIT_FLAT_FUSED(OPN, DT, OP, T)
#elif defined(GK_VARIANT_NAIVE)
// the per-list unit: every per-list kernel the flattened strategies may pick
#define GK_EMIT(OPN, DT, OP, T)                                                                      \
  GK_EMIT_PER_THREAD(OPN, DT, OP, T) GK_EMIT_PER_THREAD_STAGED(OPN, DT, OP, T)                       \
  GK_EMIT_PER_WAVE(OPN, DT, OP, T)
#else
#error "define one of GK_VARIANT_SPLIT, GK_VARIANT_FUSED, GK_VARIANT_NAIVE"
#endif


// list lengths (reads offsets only; the same in every strategy)
#if defined(GK_OP_COUNT)
extern "C" __global__ void GK_LB gk_count(const gk_i64* off, gk_i64 n, gk_i64* out) {
  const gk_i64 r = (gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x;
  if (r < n) out[r] = off[r + 1] - off[r];
}
#endif

// dtype tables: (name, C type)
#define GK_INTS(X, OPN, OP)                                                                         \
  X(OPN, int8, OP, signed char) X(OPN, int16, OP, short) X(OPN, int32, OP, int)                     \
  X(OPN, int64, OP, long long) X(OPN, uint8, OP, unsigned char) X(OPN, uint16, OP, unsigned short)  \
  X(OPN, uint32, OP, unsigned) X(OPN, uint64, OP, unsigned long long)
#define GK_FLOATS(X, OPN, OP) X(OPN, float32, OP, float) X(OPN, float64, OP, double)
#define GK_BOOL(X, OPN, OP) X(OPN, bool, OP, unsigned char)
#define GK_NUMBERS(X, OPN, OP) GK_INTS(X, OPN, OP) GK_FLOATS(X, OPN, OP)
#define GK_ALL(X, OPN, OP) GK_NUMBERS(X, OPN, OP) GK_BOOL(X, OPN, OP)

#if defined(GK_OP_SUM)
GK_NUMBERS(GK_EMIT, sum, gk::Sum)
#endif
#if defined(GK_OP_PROD)
GK_NUMBERS(GK_EMIT, prod, gk::Prod)
#endif
#if defined(GK_OP_SUM_BOOL)
GK_BOOL(GK_EMIT, sum_bool, gk::SumBool)
#endif
#if defined(GK_OP_PROD_BOOL)
GK_BOOL(GK_EMIT, prod_bool, gk::ProdBool)
#endif
#if defined(GK_OP_MIN)
GK_ALL(GK_EMIT, min, gk::Min)
#endif
#if defined(GK_OP_MAX)
GK_ALL(GK_EMIT, max, gk::Max)
#endif
#if defined(GK_OP_ARGMIN)
GK_ALL(GK_EMIT, argmin, gk::ArgMin)
#endif
#if defined(GK_OP_ARGMAX)
GK_ALL(GK_EMIT, argmax, gk::ArgMax)
#endif
#if defined(GK_OP_COUNTNONZERO)
GK_ALL(GK_EMIT, countnonzero, gk::CountNonzero)
#endif
#if defined(GK_OP_ANY)
GK_ALL(GK_EMIT, any, gk::Any)
#endif
#if defined(GK_OP_ALL)
GK_ALL(GK_EMIT, all, gk::All)
#endif
