// Per-wave lists, a batch of lists of a few dozen elements read through the wave's shared
// memory first (docs/gpu-reduction.md#staged); its kernel is per_wave_body<STAGED>.
#ifndef GK_REDUCE_PER_WAVE_STAGED_CUH
#define GK_REDUCE_PER_WAVE_STAGED_CUH

#include "reduce_per_thread_staged.cuh"
#include "reduce_wave_stream.cuh"

// bytes of the wave's shared memory per chunk; a batch is staged where half of its lists
// are at least STAGE_MIN long and none is longer than STAGE_MAX (docs/gpu-reduction.md#staged)
#ifndef GK_PER_WAVE_STAGE
#define GK_PER_WAVE_STAGE 4096
#endif
#ifndef GK_PER_WAVE_STAGE_MIN
#define GK_PER_WAVE_STAGE_MIN 16
#endif
#ifndef GK_PER_WAVE_STAGE_MAX
#define GK_PER_WAVE_STAGE_MAX 96
#endif
static_assert(GK_PER_WAVE_STAGE % 16 == 0, "GK_PER_WAVE_STAGE must be a whole number of vectors");

namespace gk {

// A staged batch (GK_PER_WAVE_STAGE): the lists [q, min(q + W, n)), this lane's [s, e).
template <class Op, class T>
__device__ __forceinline__ void staged_batch(const Op& op, const gk_i64* __restrict__ off,
                                             gk_i64 n, const T* __restrict__ content_al,
                                             gk_i64 shift, gk_i64 q, gk_i64 s, gk_i64 e,
                                             typename Op::out_t* __restrict__ out) {
  constexpr int VEC = 16 / (int)sizeof(T);
  constexpr int NVEC = GK_PER_WAVE_STAGE / 16;          // vectors per chunk
  constexpr gk_i64 CHUNK = (gk_i64)NVEC * VEC;         // elements per chunk
  __shared__ gk_vec16 stage[GK_PER_WAVE_BLOCK / GK_MIN_WAVE_WIDTH][NVEC];
  const int W = warpSize, lane = gk_lane();
  const gk_i64 r = q + lane, end_list = (q + W < n ? q + W : n);
  // the batch's content in content_al positions, from a vector boundary (content_al is
  // 16-byte aligned, allocations are padded)
  const gk_i64 S0 = ((off[q] + shift) / VEC) * VEC, E0 = off[end_list] + shift;
  const typename Op::acc_t acc = fold_span_staged<Op, T, CHUNK, true>(
      op, stage[gk_wave()], reinterpret_cast<const gk_vec16*>(content_al), S0, E0, shift,
      s + shift, e + shift);
  if (r < n) out[r] = (s == e) ? op.empty() : op.finalize(acc, off, r);
}

}  // namespace gk

#endif  // GK_REDUCE_PER_WAVE_STAGED_CUH
