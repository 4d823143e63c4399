// Per-wave lists: a wave takes 32 or 64 consecutive lists, short ones one per lane, medium
// ones by groups of lanes, long ones streamed by the whole wave
// (docs/gpu-reduction.md#per-wave).
#ifndef GK_REDUCE_PER_WAVE_CUH
#define GK_REDUCE_PER_WAVE_CUH

#include "reduce_per_wave_staged.cuh"
#include "reduce_long_tail.cuh"

namespace gk {

// STAGED: per_wave_staged (staged batches first, reduce_per_wave_staged.cuh); LONG_TAIL:
// long_tail (reduce_long_tail.cuh); BLOCK: the kernel's block size
template <class Op, class T, bool STAGED, bool LONG_TAIL = false, int BLOCK = GK_PER_WAVE_BLOCK>
__device__ __forceinline__ void per_wave_body(const gk_i64* __restrict__ off, gk_i64 n,
                                            const T* __restrict__ content_al, gk_i64 shift,
                                            gk_u64 ident, typename Op::out_t* __restrict__ out,
                                            unsigned char* __restrict__ empty) {
  static_assert(!(STAGED && LONG_TAIL), "the staged kernel has no long-tail queue");
  const int W = warpSize, lane = gk_lane();
  // this wave's batch: lists [q, q + W)
  const gk_i64 q = ((gk_i64)blockIdx.x * (BLOCK / W) + gk_wave()) * W;
  // whole waves leave together; in the shared kernel every wave reaches the block's
  // barrier (one past the end queues nothing and takes queued lists)
  if (!LONG_TAIL && q >= n) return;
  const gk_i64 r = q + lane;
  const bool mine = r < n;
  const gk_i64 s = mine ? off[r] : 0, e = mine ? off[r + 1] : 0;
  const Op op(ident);
  const bool is_long = e - s > GK_LONG_LIST;
  if (mine && empty) empty[r] = (s == e);
  if constexpr (STAGED) {
    // at least half of the batch's lists GK_PER_WAVE_STAGE_MIN long, none longer than
    // GK_PER_WAVE_STAGE_MAX: ballots over 32-bit lengths (a 64-bit span of the batch, kept
    // across the unstaged path, spilled that path's sums); the whole wave takes one path
    const int len = (int)(e - s < GK_PER_WAVE_STAGE_MAX + 1 ? e - s : GK_PER_WAVE_STAGE_MAX + 1);
    if (2 * __popcll(gk_ballot(len >= GK_PER_WAVE_STAGE_MIN)) >= __popcll(gk_ballot(mine)) &&
        gk_ballot(len > GK_PER_WAVE_STAGE_MAX) == 0) {
      staged_batch<Op, T>(op, off, n, content_al, shift, q, s, e, out);
      return;
    }
  }
  // the shared kernel's queue: wave w's streamed lists at [w * W, w * W + count[w]), in
  // lane order (their bounds, and the list's lane in the batch)
  constexpr int QUEUE = LONG_TAIL ? BLOCK : 1;
  __shared__ gk_i64 queue_s[QUEUE], queue_e[QUEUE];
  __shared__ int queue_lane[QUEUE], queue_count[LONG_TAIL ? BLOCK / GK_MIN_WAVE_WIDTH : 1];
  __shared__ int queue_next;
  if constexpr (LONG_TAIL) {
#if GK_PER_WAVE_GROUP > 1 && GK_PER_WAVE_LANE_FOLD
    const bool streamed = is_long && e - s > (gk_i64)W * stream_shape<T>::ITEMS / 2;
#else
    const bool streamed = is_long;
#endif
    const gk_lanemask_t queued = gk_ballot(streamed);
    const int base = gk_wave() * W;
    if (streamed) {
      const int rank = __popcll(queued & (((gk_lanemask_t)1 << lane) - 1));
      queue_s[base + rank] = s;
      queue_e[base + rank] = e;
      queue_lane[base + rank] = lane;
    }
    if (lane == 0) queue_count[gk_wave()] = __popcll(queued);
    if (threadIdx.x == 0) queue_next = 0;
    __syncthreads();
  }
  if (mine && !is_long) {
    if (s == e) {
      out[r] = op.empty();
    } else {
      typename Op::acc_t acc = op.identity();
      for (gk_i64 a = s; a < e; a += GK_PER_WAVE_SHORT_BATCH) {
        T v[GK_PER_WAVE_SHORT_BATCH];
#pragma unroll
        for (int k = 0; k < GK_PER_WAVE_SHORT_BATCH; ++k)
          v[k] = (a + k < e) ? content_al[a + k + shift] : T(0);
#pragma unroll
        for (int k = 0; k < GK_PER_WAVE_SHORT_BATCH; ++k)
          if (a + k < e) acc = op.fold(acc, v[k], a + k, a + k == s);
      }
      out[r] = op.finalize(acc, off, r);
    }
  }
#if GK_PER_WAVE_GROUP > 1 && GK_PER_WAVE_LANE_FOLD
  // medium lists: long ones of at most half a wave-tile
  const bool is_medium = is_long && e - s <= (gk_i64)W * stream_shape<T>::ITEMS / 2;
  // (the shared kernel streams them from its queue)
  gk_lanemask_t longs = LONG_TAIL ? 0 : gk_ballot(is_long && !is_medium);
  // with groups over 4 lanes, those that fit one tile of 4 lanes take 4 lanes each, W / 4
  // lists at a time
  constexpr int SMALL_GROUP = GK_PER_WAVE_GROUP > 4 ? 4 : GK_PER_WAVE_GROUP;
  const bool is_small = SMALL_GROUP < GK_PER_WAVE_GROUP && is_medium &&
                        e - s <= SMALL_GROUP * stream_shape<T>::ITEMS;
  if (SMALL_GROUP < GK_PER_WAVE_GROUP)
    longs |= medium_lists<Op, T, SMALL_GROUP>(op, off, content_al, shift, s, e, q, out,
                                              gk_ballot(is_small));
  longs |= medium_lists<Op, T, GK_PER_WAVE_GROUP>(op, off, content_al, shift, s, e, q, out,
                                                gk_ballot(is_medium && !is_small));
#else
  gk_lanemask_t longs = LONG_TAIL ? 0 : gk_ballot(is_long);
#endif
  // (in the shared kernel only medium lists walked again in order, Op::redo: walked in
  // order at once, without a second copy of the lane-folded loop)
  if (LONG_TAIL && !may_redo<Op>::value) longs = 0;
  for (; longs != 0; longs &= longs - 1) {
    const int src = __ffsll((long long)longs) - 1;
    const gk_i64 ls = gk_shfl(s, src), le = gk_shfl(e, src);
    const typename Op::acc_t acc = LONG_TAIL ? walk_list<Op, T>(op, content_al, shift, ls, le)
                                          : stream_list<Op, T>(op, content_al, shift, ls, le);
    if (lane == 0) out[q + src] = op.finalize(acc, off, q + src);
  }
  if constexpr (LONG_TAIL) {
    // the block's queue, entry k being the k-th queued list of the waves in order
    const int waves = BLOCK / W;
    const gk_i64 block_first = (gk_i64)blockIdx.x * BLOCK;
    for (;;) {
      int k = 0;
      if (lane == 0) k = atomicAdd(&queue_next, 1);
      k = gk_shfl(k, 0);
      int w = 0;
      for (; w < waves; ++w) {
        const int c = queue_count[w];
        if (k < c) break;
        k -= c;
      }
      if (w == waves) break;
      const int slot = w * W + k;
      const gk_i64 ls = queue_s[slot], le = queue_e[slot];
      const gk_i64 list = block_first + slot - k + queue_lane[slot];
      const typename Op::acc_t acc = stream_list<Op, T>(op, content_al, shift, ls, le);
      if (lane == 0) out[list] = op.finalize(acc, off, list);
    }
  }
}

}  // namespace gk

// extern "C" entry points: gk_<op>_<dtype>_per_wave, _per_wave_staged, _long_tail
#define GK_EMIT_PER_WAVE(OPN, DT, OP, T)                                                             \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_PER_WAVE_BLOCK, GK_PER_WAVE_MIN_BLOCKS)             \
  gk_##OPN##_##DT##_per_wave(                                                                        \
      GK_PER_LIST_PARAMS(OP, T)) {                                                                   \
    gk::per_wave_body<OP<T>, T, false>(off, n, content_al, shift, ident, out, empty);                \
  }                                                                                                  \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_PER_WAVE_BLOCK, GK_PER_WAVE_MIN_BLOCKS)             \
  gk_##OPN##_##DT##_per_wave_staged(                                                                 \
      GK_PER_LIST_PARAMS(OP, T)) {                                                                   \
    gk::per_wave_body<OP<T>, T, true>(off, n, content_al, shift, ident, out, empty);                 \
  }                                                                                                  \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_LONG_TAIL_BLOCK, GK_LONG_TAIL_MIN_BLOCKS)           \
  gk_##OPN##_##DT##_long_tail(                                                                       \
      GK_PER_LIST_PARAMS(OP, T)) {                                                                   \
    gk::per_wave_body<OP<T>, T, false, true, GK_LONG_TAIL_BLOCK>(off, n, content_al, shift, ident,   \
                                                                 out, empty);                        \
  }

#endif  // GK_REDUCE_PER_WAVE_CUH
