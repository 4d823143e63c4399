// Per-thread lists, the block's content staged in shared memory with coalesced 128-bit
// loads first (docs/gpu-reduction.md#per-thread).
#ifndef GK_REDUCE_PER_THREAD_STAGED_CUH
#define GK_REDUCE_PER_THREAD_STAGED_CUH

#include "reduce_ops.cuh"

namespace gk {

// One list per thread, the block's content span staged GK_PER_THREAD_STAGE_BYTES at a time
// with coalesced 128-bit loads: one lane per list strides a wave's loads over many lines.
#ifndef GK_PER_THREAD_STAGE_BYTES
#define GK_PER_THREAD_STAGE_BYTES 16384
#endif
// Fold this thread's list [s, e) (content_al positions), clamped to the staged run ``tile``
// that holds positions [base, end), into ``acc``, in 32-bit run-relative indices (the
// kernel runs at full occupancy: 32 registers per thread). The list's head, when in
// this run, is the thread's first element here: folded first, so the loop itself tests
// nothing (the arg-reductions spilled at 32 registers with the test inside). Unrolled 4
// times: four reads before their ordered folds (docs/gpu-reduction.md#kernel-notes).
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t fold_staged(const Op& op, typename Op::acc_t acc,
                                                          const T* tile, gk_i64 base, gk_i64 end,
                                                          gk_i64 shift, gk_i64 s, gk_i64 e) {
  const int j0 = (int)((s < base ? base : (s > end ? end : s)) - base);
  const int j1 = (int)((e < base ? base : (e > end ? end : e)) - base);
  const int head = (s >= base && s < end) ? (int)(s - base) : -1;
  const gk_i64 pos0 = base - shift;  // the content position of tile[0]
  int j = j0;
  if (head >= 0 && j < j1) {
    acc = op.fold(acc, tile[j], pos0 + j, true);
    ++j;
  }
#pragma unroll 4
  for (; j < j1; ++j) acc = op.fold(acc, tile[j], pos0 + j, false);
  return acc;
}

// Fold this thread's list [s, e) over the content span [S, E) (content_al positions, S on
// a vector boundary), read RUN elements at a time into ``stage`` with coalesced 128-bit
// loads by the whole block, or by this wave alone (WAVE, into its own ``stage``).
template <bool WAVE>
__device__ __forceinline__ void wave_or_block_sync() {
  if constexpr (WAVE) gk_wave_sync(); else __syncthreads();
}

template <class Op, class T, gk_i64 RUN, bool WAVE>
__device__ __forceinline__ typename Op::acc_t fold_span_staged(const Op& op, gk_vec16* stage,
                                                               const gk_vec16* src, gk_i64 S,
                                                               gk_i64 E, gk_i64 shift, gk_i64 s,
                                                               gk_i64 e) {
  constexpr int VEC = 16 / (int)sizeof(T);
  const T* run = reinterpret_cast<const T*>(stage);
  const int first = WAVE ? gk_lane() : (int)threadIdx.x;
  const int stride = WAVE ? warpSize : GK_BLOCK;
  typename Op::acc_t acc = op.identity();
  for (gk_i64 base = S; base < E; base += RUN) {
    const gk_i64 count = (E - base < RUN ? E - base : RUN);
    const int nvec = (int)((count + VEC - 1) / VEC);
    wave_or_block_sync<WAVE>();  // the previous run is no longer read
    // 4 loads in flight per thread; fully unrolled the loop needs 90+ registers
#pragma unroll 4
    for (int i = first; i < nvec; i += stride) stage[i] = src[base / VEC + i];
    wave_or_block_sync<WAVE>();
    acc = fold_staged<Op, T>(op, acc, run, base, base + count, shift, s, e);
  }
  return acc;
}

template <class Op, class T>
__device__ void per_thread_staged_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_u64 ident, typename Op::out_t* __restrict__ out,
                           unsigned char* __restrict__ empty) {
  constexpr int VEC = 16 / (int)sizeof(T);
  constexpr gk_i64 TILE = GK_PER_THREAD_STAGE_BYTES / (gk_i64)sizeof(T);  // a whole number of vectors
  __shared__ gk_vec16 stage[GK_PER_THREAD_STAGE_BYTES / 16];
  const gk_i64 first = (gk_i64)blockIdx.x * GK_BLOCK;
  const gk_i64 last = (first + GK_BLOCK < n ? first + GK_BLOCK : n);  // lists [first, last)
  const gk_i64 r = first + threadIdx.x;
  const bool mine = r < n;
  const Op op(ident);
  // positions in content_al (element a of the content is content_al[a + shift]); the span
  // starts on a vector boundary (content_al is 16-byte aligned, allocations are padded)
  const gk_i64 s = mine ? off[r] + shift : 0, e = mine ? off[r + 1] + shift : 0;
  const gk_i64 S = ((off[first] + shift) / VEC) * VEC, E = off[last] + shift;
  const typename Op::acc_t acc = fold_span_staged<Op, T, TILE, false>(
      op, stage, reinterpret_cast<const gk_vec16*>(content_al), S, E, shift, s, e);
  if (!mine) return;
  out[r] = (s == e) ? op.empty() : op.finalize(acc, off, r);
  if (empty) empty[r] = (s == e);
}

}  // namespace gk

// extern "C" entry point: gk_<op>_<dtype>_per_thread_staged
#define GK_EMIT_PER_THREAD_STAGED(OPN, DT, OP, T) \
  GK_EMIT_PER_LIST(OPN, DT, OP, T, per_thread_staged, per_thread_staged_body)

#endif  // GK_REDUCE_PER_THREAD_STAGED_CUH
