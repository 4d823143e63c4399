// Flattened, split strategy: partition, reduce and fixup passes, no atomics
// (docs/gpu-reduction.md#cdna).
#ifndef GK_REDUCE_FLAT_SPLIT_CUH
#define GK_REDUCE_FLAT_SPLIT_CUH

#include "reduce_flat_walk.cuh"

namespace gk {

// Pass 1: P[w] = first list whose first element is at or after range w's start.
__device__ void partition_body(const gk_i64* __restrict__ off, gk_i64 n, gk_i64 shift, gk_i64 E,
                               gk_i64 ntiles, gk_i64 R, gk_i64* __restrict__ P) {
  const gk_i64 w = global_wave();
  if (w >= R) return;  // whole waves leave together
  const gk_i64 p = wave_lower_bound(off, n, range_start(w, ntiles, R) * E - shift);
  if (gk_lane() == 0) P[w] = p;
}

// Pass 2: each wave walks its range and writes its lead and tail records.
template <class Op, class T>
__device__ __forceinline__ void flat_split_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_u64 ident,
                           const gk_i64* __restrict__ P, typename Op::acc_t* lead_acc,
                           typename Op::acc_t* tail_acc, gk_i64* tail_list,
                           typename Op::out_t* __restrict__ out) {
  __shared__ smem_t sm;
  if (global_wave() >= R) return;  // whole waves leave together
  const Op op(ident);
  const wave_range<T> g(off, n, ntiles, R);
  range_result<Op, T> res = walk_range<Op, T>(
      op, off, n, content_al, shift, g.k0, g.k1, ntiles, P[g.w], g.qlo, g.qhi,
      sm.headbits + gk_wave() * warpSize, sm.hid + gk_wave() * warpSize * tile_shape<T>::ITEMS,
      out);
  if (gk_lane() == 0) {
    lead_acc[g.w] = res.lead;
    gk_i64 tl = -1;
    if (res.tail_list >= 0) {
      if (off[res.tail_list + 1] <= g.k1 * g.E - shift) {
        out[res.tail_list] = op.finalize(res.tail, off, res.tail_list);
      } else {
        tl = res.tail_list;
        tail_acc[g.w] = res.tail;
      }
    }
    tail_list[g.w] = tl;
  }
}

// Pass 3: fold the partials of lists that continued past their range.
template <class Op, class T>
__device__ void flat_fixup_body(const gk_i64* __restrict__ off, gk_i64 n, gk_i64 shift, gk_i64 ntiles,
                           gk_i64 R, gk_i64 E, gk_u64 ident, const typename Op::acc_t* lead_acc,
                           const typename Op::acc_t* tail_acc, const gk_i64* tail_list,
                           typename Op::out_t* __restrict__ out) {
  const gk_i64 w = (gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x;
  if (w >= R) return;
  const gk_i64 r = tail_list[w];
  if (r < 0) return;
  const Op op(ident);
  const gk_i64 end = off[r + 1];
  typename Op::acc_t acc = tail_acc[w];
  for (gk_i64 j = w + 1; j < R && range_start(j, ntiles, R) * E - shift < end; ++j)
    acc = op.combine(acc, lead_acc[j]);
  out[r] = op.finalize(acc, off, r);
}

}  // namespace gk

// extern "C" entry points of the split strategy: gk_<op>_<dtype>_flat_split, _flat_fixup
#define GK_EMIT_FLAT_SPLIT(OPN, DT, OP, T)                                                           \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_flat_split(                                     \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, const gk_i64* P, OP<T>::acc_t* lead_acc, OP<T>::acc_t* tail_acc,                 \
      gk_i64* tail_list, OP<T>::out_t* out) {                                                        \
    gk::flat_split_body<OP<T>, T>(off, n, content_al, shift, ntiles, R, ident, P, lead_acc,          \
                                  tail_acc, tail_list, out);                                         \
  }                                                                                                  \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_flat_fixup(                                     \
      const gk_i64* off, gk_i64 n, gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_i64 E, gk_u64 ident,    \
      const OP<T>::acc_t* lead_acc, const OP<T>::acc_t* tail_acc, const gk_i64* tail_list,           \
      OP<T>::out_t* out) {                                                                           \
    gk::flat_fixup_body<OP<T>, T>(off, n, shift, ntiles, R, E, ident, lead_acc, tail_acc,            \
                                  tail_list, out);                                                   \
  }

#endif  // GK_REDUCE_FLAT_SPLIT_CUH
