// A whole wave, or a group of lanes, streaming one list in tiles of 128-bit loads: the
// long and medium lists of the per-wave kernels (docs/gpu-reduction.md#per-wave).
#ifndef GK_REDUCE_WAVE_STREAM_CUH
#define GK_REDUCE_WAVE_STREAM_CUH

#include "reduce_ops.cuh"

namespace gk {

// lists longer than this leave their lane: to a group of lanes or the whole wave
#ifndef GK_LONG_LIST
#define GK_LONG_LIST 32
#endif
#ifndef GK_PER_WAVE_ITEM_BYTES
#define GK_PER_WAVE_ITEM_BYTES 64
#endif
#ifndef GK_PER_WAVE_MIN_BLOCKS
#define GK_PER_WAVE_MIN_BLOCKS 4
#endif
// its own block size: a block frees its slots only when its slowest wave ends
#ifndef GK_PER_WAVE_BLOCK
#define GK_PER_WAVE_BLOCK GK_BLOCK
#endif
static_assert(GK_PER_WAVE_BLOCK % 64 == 0, "block sizes must be multiples of 64");
// lanes keep accumulators across a list's tiles, merged once (Op::merge; Op::redo walks the
// list again in order): no shuffle chain between tiles (docs/gpu-reduction.md#per-wave)
#ifndef GK_PER_WAVE_LANE_FOLD
#define GK_PER_WAVE_LANE_FOLD 1
#endif
// lanes read consecutive 16-byte vectors: one contiguous run per load instruction
// (docs/gpu-reduction.md#per-wave)
#ifndef GK_PER_WAVE_INTERLEAVE
#define GK_PER_WAVE_INTERLEAVE 0
#endif
// a short list's elements loaded before any is folded: one memory latency per list
#ifndef GK_PER_WAVE_SHORT_BATCH
#define GK_PER_WAVE_SHORT_BATCH 1
#endif
// lanes per medium list (at most half a wave-tile); above 4, lists fitting one 4-lane tile
// take 4 (docs/gpu-reduction.md#per-wave)
#ifndef GK_PER_WAVE_GROUP
#define GK_PER_WAVE_GROUP 1
#endif
static_assert(GK_PER_WAVE_GROUP >= 1 && GK_PER_WAVE_GROUP <= 32 &&
              (GK_PER_WAVE_GROUP & (GK_PER_WAVE_GROUP - 1)) == 0,
              "GK_PER_WAVE_GROUP must be a power of two up to 32");
// 128-bit vectors per lane per wave-tile of a streamed list; at most 16 elements per lane
// (narrow types would otherwise unroll into more registers than the bound allows)
template <class T> struct stream_shape {
  static constexpr int VEC = 16 / (int)sizeof(T);
  static constexpr int NV_BYTES = GK_PER_WAVE_ITEM_BYTES / 16, NV_CAP = 16 / VEC;
  static constexpr int NV = NV_BYTES < NV_CAP ? NV_BYTES : (NV_CAP < 1 ? 1 : NV_CAP);
  static constexpr int ITEMS = NV * VEC;
};
// Fold this lane's stretch of the wave-tile at rb (content_al positions) into ``part``:
// every load first, then the arithmetic, elements outside [ls, le) skipped.
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t fold_stretch(const Op& op, typename Op::acc_t part,
                                                           const gk_vec16* __restrict__ src,
                                                           gk_i64 shift, gk_i64 ls, gk_i64 le,
                                                           gk_i64 rb, gk_i64 last) {
  typedef stream_shape<T> S;
  const gk_i64 b0 = rb + (gk_i64)gk_lane() * S::ITEMS;
  gk_vec_view16<T> u[S::NV];
#pragma unroll
  for (int c = 0; c < S::NV; ++c) {
    const gk_i64 av = b0 + c * S::VEC;
    if (av < last) u[c].v = src[av / S::VEC]; else u[c].v = gk_vec16();
  }
  // the list's bounds relative to the stretch, once per stretch in 32 bits; a stretch
  // wholly inside the list (without its head) folds with no test at all
  // (docs/gpu-reduction.md#kernel-notes)
  const gk_i64 p0 = b0 - shift;  // content position of the stretch's first element
  const gk_i64 dlo = ls - p0, dhi = le - p0;
  if (dlo < 0 && dhi >= S::ITEMS) {
#pragma unroll
    for (int c = 0; c < S::NV; ++c) {
#pragma unroll
      for (int k = 0; k < S::VEC; ++k) part = op.fold(part, u[c].e[k], p0 + c * S::VEC + k, false);
    }
    return part;
  }
  const int lo = dlo < 0 ? 0 : (dlo > S::ITEMS ? S::ITEMS : (int)dlo);
  const int hi = dhi < 0 ? 0 : (dhi > S::ITEMS ? S::ITEMS : (int)dhi);
#pragma unroll
  for (int c = 0; c < S::NV; ++c) {
#pragma unroll
    for (int k = 0; k < S::VEC; ++k) {
      const int j = c * S::VEC + k;
      if (j >= lo && j < hi) part = op.fold(part, u[c].e[k], p0 + j, j == dlo);
    }
  }
  return part;
}

// The streamed lists' 128-bit loads (GK_STREAM_LOAD, the table's ``stream_load``): 0 a
// plain load; on CUDA 1 ld.global.nc, 2 the same with a 256-byte L2 prefetch, 3 also
// L1::no_allocate, 4 ld.global.cs (evict first: each line is read once;
// docs/gpu-reduction.md#per-wave). HIP always reads plainly (not measured on AMD).
#ifndef GK_STREAM_LOAD
#define GK_STREAM_LOAD 0
#endif
__device__ __forceinline__ gk_vec16 stream_load(const gk_vec16* __restrict__ p) {
#if GK_STREAM_LOAD != 0 && defined(__CUDA_ARCH__)
  gk_vec16 r;
#if GK_STREAM_LOAD == 1
  asm("ld.global.nc.v2.u64 {%0, %1}, [%2];" : "=l"(r.lo), "=l"(r.hi) : "l"(p));
#elif GK_STREAM_LOAD == 2
  asm("ld.global.nc.L2::256B.v2.u64 {%0, %1}, [%2];" : "=l"(r.lo), "=l"(r.hi) : "l"(p));
#elif GK_STREAM_LOAD == 3
  asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u64 {%0, %1}, [%2];"
      : "=l"(r.lo), "=l"(r.hi) : "l"(p));
#else
  asm("ld.global.cs.v2.u64 {%0, %1}, [%2];" : "=l"(r.lo), "=l"(r.hi) : "l"(p));
#endif
  return r;
#else
  return *p;
#endif
}

// Fold this lane's vectors of the wave-tile at rb (content_al positions, a multiple of the
// vector width) into ``part``: vector c of lane l is the tile's vector c * warpSize + l.
// Every load first, then the arithmetic; a vector wholly inside the list (without its head)
// folds with no test. The list's bounds relative to the tile are computed once, clamped
// to 32 bits (64-bit bounds per vector spilled the int32 sums at 40 registers).
// The tile may also be a group's: ``lanes`` lanes (the wave's or a group's), this one the
// k-th of them.
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t fold_interleaved(const Op& op, typename Op::acc_t part,
                                                               const gk_vec16* __restrict__ src,
                                                               gk_i64 shift, gk_i64 ls, gk_i64 le,
                                                               gk_i64 rb, gk_i64 last, int lanes,
                                                               int k) {
  typedef stream_shape<T> S;
  const gk_i64 v0 = rb / S::VEC + k;  // this lane's first vector
  gk_vec_view16<T> u[S::NV];
#pragma unroll
  for (int c = 0; c < S::NV; ++c) {
    const gk_i64 av = (v0 + (gk_i64)c * lanes) * S::VEC;
    if (av < last) u[c].v = stream_load(src + av / S::VEC); else u[c].v = gk_vec16();
  }
  const gk_i64 t0 = rb - shift;                  // content position of the tile's first element
  const gk_i64 span = (gk_i64)lanes * S::ITEMS + 1;
  const gk_i64 lo64 = ls - t0, hi64 = le - t0;   // the list in tile positions
  const int tlo = (int)(lo64 < -1 ? -1 : (lo64 > span ? span : lo64));
  const int thi = (int)(hi64 < -1 ? -1 : (hi64 > span ? span : hi64));
#pragma unroll
  for (int c = 0; c < S::NV; ++c) {
    const int o = (c * lanes + k) * S::VEC;  // the vector's first element in the tile
    const int dlo = tlo - o, dhi = thi - o;
    const gk_i64 p = t0 + o;
    if (dlo < 0 && dhi >= S::VEC) {
#pragma unroll
      for (int k = 0; k < S::VEC; ++k) part = op.fold(part, u[c].e[k], p + k, false);
    } else {
#pragma unroll
      for (int k = 0; k < S::VEC; ++k)
        if (k >= dlo && k < dhi) part = op.fold(part, u[c].e[k], p + k, k == dlo);
    }
  }
  return part;
}

// Reduce the list [ls, le) with the whole wave in order: an ordered wave reduction per tile
// (the result in every lane).
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t walk_list(const Op& op,
                                                        const T* __restrict__ content_al,
                                                        gk_i64 shift, gk_i64 ls, gk_i64 le) {
  typedef stream_shape<T> S;
  const gk_i64 E = (gk_i64)warpSize * S::ITEMS;
  const gk_vec16* src = reinterpret_cast<const gk_vec16*>(content_al);
  const gk_i64 first = ((ls + shift) / S::VEC) * S::VEC, last = le + shift;
  typename Op::acc_t acc = op.identity();
  for (gk_i64 rb = first; rb < last; rb += E)
    acc = op.combine(acc, wave_reduce<Op>(
        op, fold_stretch<Op, T>(op, op.identity(), src, shift, ls, le, rb, last)));
  return acc;
}

// Reduce the list [ls, le) with the whole wave (the result in every lane).
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t stream_list(const Op& op,
                                                          const T* __restrict__ content_al,
                                                          gk_i64 shift, gk_i64 ls, gk_i64 le) {
  typedef typename Op::acc_t A;
  typedef stream_shape<T> S;
  const gk_i64 E = (gk_i64)warpSize * S::ITEMS;
  const gk_vec16* src = reinterpret_cast<const gk_vec16*>(content_al);
  // tiles start on a vector boundary of content_al (element a is content_al[a + shift])
  const gk_i64 first = ((ls + shift) / S::VEC) * S::VEC;  // in content_al positions
  const gk_i64 last = le + shift;
#if GK_PER_WAVE_LANE_FOLD
  {
    // each lane folds its share of every tile (its vectors interleaved with the other
    // lanes', or its own stretch), one wave merge per list. With one vector per lane
    // (1-byte values) the two layouts read the same addresses: the stretch code runs
    constexpr bool interleaved = GK_PER_WAVE_INTERLEAVE && S::NV > 1;
    A part = op.identity();
    for (gk_i64 rb = first; rb < last; rb += E)
      part = interleaved ? fold_interleaved<Op, T>(op, part, src, shift, ls, le, rb, last,
                                                   warpSize, gk_lane())
                         : fold_stretch<Op, T>(op, part, src, shift, ls, le, rb, last);
    const A merged = wave_merge<Op>(op, part);
    if (!op.redo(merged)) return merged;
  }
#endif
  return walk_list<Op, T>(op, content_al, shift, ls, le);
}

#if GK_PER_WAVE_GROUP > 1 && GK_PER_WAVE_LANE_FOLD
// Reduce the lists of the lanes in ``mediums`` (bounds in s, e) in rounds, W / G at a time
// with G = GK_PER_WAVE_GROUP lanes each. Returns the lanes whose lists must be walked again
// in order (Op::redo).
template <class Op, class T, int G>
__device__ __forceinline__ gk_lanemask_t medium_lists(const Op& op, const gk_i64* __restrict__ off,
                                                      const T* __restrict__ content_al,
                                                      gk_i64 shift, gk_i64 s, gk_i64 e, gk_i64 q,
                                                      typename Op::out_t* __restrict__ out,
                                                      gk_lanemask_t mediums) {
  typedef typename Op::acc_t A;
  typedef stream_shape<T> S;
  const int lane = gk_lane(), g = lane / G, k = lane % G;
  const gk_vec16* src = reinterpret_cast<const gk_vec16*>(content_al);
  gk_lanemask_t redo = 0;
  while (mediums != 0) {
    // this round: group i takes the i-th lane of ``mediums``
    const gk_lanemask_t before = mediums;
    int taken = -1;                        // the lane whose list this lane's group takes
    for (int i = 0; i < warpSize / G && mediums != 0; ++i) {
      if (i == g) taken = __ffsll((long long)mediums) - 1;
      mediums &= mediums - 1;
    }
    // (every shuffle by every lane: a lane left out of one may be the one read)
    const int from = taken < 0 ? lane : taken;
    const gk_i64 ls = gk_shfl(s, from), le_taken = gk_shfl(e, from);
    const gk_i64 le = taken < 0 ? ls : le_taken;
    const gk_i64 last = le + shift;
    const gk_i64 first = taken < 0 ? last : ((ls + shift) / S::VEC) * S::VEC;
    A part = op.identity();
    for (gk_i64 rb = first; gk_ballot(rb < last) != 0; rb += (gk_i64)G * S::ITEMS)
      part = fold_interleaved<Op, T>(op, part, src, shift, ls, le, rb, last, G, k);
    // a group's lanes into its first one (the lanes above read a neighbour's, unused)
    for (int d = G / 2; d > 0; d >>= 1) part = op.merge(part, shfl<A>::down(part, d));
    const bool again = taken >= 0 && k == 0 && op.redo(part);
    if (taken >= 0 && k == 0 && !again) out[q + taken] = op.finalize(part, off, q + taken);
    // which of the round's lists must be walked again: each lane asks the first lane of the
    // group that took its list (its rank among the round's lanes)
    const gk_lanemask_t round = before & ~mediums;
    const bool in_round = (round >> lane) & 1;
    const int rank = __popcll(round & (((gk_lanemask_t)1 << lane) - 1));
    const int leader_again = gk_shfl((int)again, in_round ? rank * G : lane);
    redo |= gk_ballot(in_round && leader_again != 0);
  }
  return redo;
}
#endif

}  // namespace gk

#endif  // GK_REDUCE_WAVE_STREAM_CUH
