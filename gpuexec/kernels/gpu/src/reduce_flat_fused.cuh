// Flattened, fused strategy: one persistent pass (docs/gpu-reduction.md#sm_90).
#ifndef GK_REDUCE_FLAT_FUSED_CUH
#define GK_REDUCE_FLAT_FUSED_CUH

#include "reduce_flat_walk.cuh"

namespace gk {

// One launch; each wave searches its start, walks its range and finishes its last
// list by reading on past the range end.
template <class Op, class T>
__device__ __forceinline__ void flat_fused_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_u64 ident,
                           typename Op::out_t* __restrict__ out) {
  __shared__ smem_t sm;
  if (global_wave() >= R) return;  // whole waves leave together
  const Op op(ident);
  const wave_range<T> g(off, n, ntiles, R);
  const gk_i64 p0 = wave_lower_bound(off, n, g.k0 * g.E - shift);
  range_result<Op, T> res = walk_range<Op, T>(
      op, off, n, content_al, shift, g.k0, g.k1, ntiles, p0, g.qlo, g.qhi,
      sm.headbits + gk_wave() * warpSize, sm.hid + gk_wave() * warpSize * tile_shape<T>::ITEMS,
      out);
  if (res.tail_list >= 0) {
    const gk_i64 r = res.tail_list;
    const gk_i64 end = off[r + 1];
    const gk_i64 range_end = g.k1 * g.E - shift;
    typename Op::acc_t acc = res.tail;
    if (end > range_end)
      acc = walk_on<Op, T>(op, off, content_al, shift, range_end, end, g.qlo, acc);
    if (gk_lane() == 0) out[r] = op.finalize(acc, off, r);
  }
}

}  // namespace gk

// extern "C" entry point of the fused strategy: gk_<op>_<dtype>_flat_fused
#define GK_EMIT_FLAT_FUSED(OPN, DT, OP, T)                                                           \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_flat_fused(                                     \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out) {                                                             \
    gk::flat_fused_body<OP<T>, T>(off, n, content_al, shift, ntiles, R, ident, out);                 \
  }

#endif  // GK_REDUCE_FLAT_FUSED_CUH
