// Per-thread lists: one thread per list, read from global memory
// (docs/gpu-reduction.md#per-thread).
#ifndef GK_REDUCE_PER_THREAD_CUH
#define GK_REDUCE_PER_THREAD_CUH

#include "reduce_ops.cuh"

namespace gk {

// One thread per list, walking it element by element.
template <class Op, class T>
__device__ void per_thread_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_u64 ident, typename Op::out_t* __restrict__ out,
                           unsigned char* __restrict__ empty) {
  const gk_i64 r = (gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x;
  if (r >= n) return;
  const Op op(ident);
  const gk_i64 s = off[r], e = off[r + 1];
  if (empty) empty[r] = (s == e);
  if (s == e) {
    out[r] = op.empty();
    return;
  }
  typename Op::acc_t acc = op.identity();
  // the unroll said (sm_90 unrolls 4 by itself): with the mask pointer the float64
  // arg-reductions otherwise spilled 8 bytes at 32 registers
#pragma unroll 4
  for (gk_i64 a = s; a < e; ++a) acc = op.fold(acc, content_al[a + shift], a, a == s);
  out[r] = op.finalize(acc, off, r);
}

}  // namespace gk

// extern "C" entry point: gk_<op>_<dtype>_per_thread
#define GK_EMIT_PER_THREAD(OPN, DT, OP, T) GK_EMIT_PER_LIST(OPN, DT, OP, T, per_thread, per_thread_body)

#endif  // GK_REDUCE_PER_THREAD_CUH
