// The flattened walk: a wave reduces a range of wave-tiles of the flat content in list order,
// handing back the list open at each end (docs/gpu-reduction.md#rows).
#ifndef GK_REDUCE_FLAT_WALK_CUH
#define GK_REDUCE_FLAT_WALK_CUH

#include "reduce_ops.cuh"

#ifndef GK_ITEM_BYTES
#define GK_ITEM_BYTES 64
#endif
#ifndef GK_MAX_ITEMS
#define GK_MAX_ITEMS 16
#endif
// wave-tiles of content (and the offsets ahead) asked into L2 ahead of the register loads
#ifndef GK_PREFETCH_TILES
#define GK_PREFETCH_TILES 1
#endif
// batches (one list per lane) of a tile's list offsets loaded one tile ahead
#ifndef GK_PREFETCH_BATCHES
#define GK_PREFETCH_BATCHES 2
#endif

namespace gk {

// ---------------------------------------------------------------------------------------
// Wave-cooperative lower bound: first i in [0, n) with a[i] >= target (n if none). Each
// step probes one position per lane and narrows the range by the wave width, so 20M
// offsets take ~5 dependent loads instead of ~25. Called by a whole wave.
__device__ __forceinline__ gk_i64 wave_lower_bound(const gk_i64* a, gk_i64 n, gk_i64 target) {
  const gk_i64 W = warpSize;
  const gk_i64 lane = gk_lane();
  gk_i64 lo = 0, hi = n;
  while (lo < hi) {
    const gk_i64 span = hi - lo;
    const gk_i64 q = lo + (span * (lane + 1)) / W - 1;
    const int pred = (q < lo) || (a[q] < target);
    const int c = __popcll(gk_ballot(pred));
    const gk_i64 new_lo = (c == 0) ? lo : lo + (span * c) / W;      // q[c-1] + 1
    const gk_i64 new_hi = (c == W) ? hi : lo + (span * (c + 1)) / W - 1;  // q[c]
    lo = new_lo;
    hi = (c == W) ? new_lo : new_hi;
  }
  return lo;
}

template <class T> struct tile_shape {
  static constexpr int VEC = GK_VEC_BYTES / (int)sizeof(T);
  static constexpr int RAW = GK_ITEM_BYTES / (int)sizeof(T);
  static constexpr int ITEMS = RAW > GK_MAX_ITEMS ? GK_MAX_ITEMS : (RAW < VEC ? VEC : RAW);
  static_assert(ITEMS % VEC == 0, "items per thread must be whole vectors");
  static_assert(ITEMS <= 32, "head bits of one lane must fit one 32-bit word");
};

// Per-block shared scratch; every wave uses its own slice (no block barriers anywhere).
struct smem_t {
  unsigned headbits[GK_BLOCK];            // one word per lane: bit j = element j starts a list
  int hid[GK_BLOCK * GK_MAX_ITEMS];       // list id (relative) of each head, striped by lane
};

__device__ __forceinline__ void gk_syncwave() {
#if defined(GK_CUDA)
  __syncwarp(gk_sync_mask());
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
}

// Load ITEMS consecutive elements starting at absolute position a0 (vector loads; vectors
// outside [qlo, qhi) are not touched).
template <class T, int ITEMS>
__device__ __forceinline__ void load_items(T (&v)[ITEMS], const T* content_al, gk_i64 shift,
                                           gk_i64 a0, gk_i64 qlo, gk_i64 qhi) {
  constexpr int VEC = GK_VEC_BYTES / (int)sizeof(T);
#pragma unroll
  for (int c = 0; c < ITEMS / VEC; ++c) {
    const gk_i64 av = a0 + c * VEC;
    gk_vec_view<T> u;
    if (av + VEC > qlo && av < qhi) {
      u.v = *reinterpret_cast<const gk_vec_t*>(content_al + (av + shift));
    } else {
      u.v = gk_vec_t();
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[c * VEC + e] = u.e[e];
  }
}


// One batch of list bounds: lane l gets (off[q + l], off[q + l + 1]); two loads, no shuffle
// (docs/gpu-reduction.md#kernel-notes).
__device__ __forceinline__ void load_batch(const gk_i64* __restrict__ off, gk_i64 n, gk_i64 q,
                                           gk_i64& s, gk_i64& e) {
  const gk_i64 r = q + gk_lane();
  s = (r < n) ? off[r] : 0;
  e = (r < n) ? off[r + 1] : 0;
}

// Range of wave-tiles [k0, k1) of wave w out of R (the same split on host and device).
__device__ __forceinline__ gk_i64 range_start(gk_i64 w, gk_i64 ntiles, gk_i64 R) {
  return (w * ntiles) / R;
}

// Waves are numbered globally; wave w walks wave-tiles [R_w, R_{w+1}), R_w = w * ntiles / R.
__device__ __forceinline__ gk_i64 global_wave() {
  return (gk_i64)blockIdx.x * (GK_BLOCK / warpSize) + gk_wave();
}

// This wave's number w, its wave-tiles [k0, k1) of E elements each, and the content's
// bounds qlo, qhi (built after the caller's global_wave() < R check).
template <class T>
struct wave_range {
  gk_i64 w, E, k0, k1, qlo, qhi;
  __device__ __forceinline__ wave_range(const gk_i64* __restrict__ off, gk_i64 n,
                                        gk_i64 ntiles, gk_i64 R)
      : w(global_wave()), E((gk_i64)warpSize * tile_shape<T>::ITEMS),
        k0(range_start(w, ntiles, R)), k1(range_start(w + 1, ntiles, R)), qlo(off[0]),
        qhi(off[n]) {}
};

// One wave walks the wave-tiles [k0, k1) in order. A wave-tile is W * ITEMS consecutive
// elements; lane l holds elements [l * ITEMS, (l + 1) * ITEMS) of it, loaded with vector
// loads one tile ahead. The run that is open at a tile's end is carried into the next
// tile; the run open at the start of the range (the "lead", a list owned by the previous
// wave) is handed to the caller, as is the run open at the end of the range (the "tail").
template <class Op, class T>
struct range_result {
  typename Op::acc_t lead;  // partial of the list owned by an earlier range
  bool lead_closed;         // a head was seen (lead is complete for this range)
  gk_i64 tail_list;         // list open at the range end (-1: none started in this range)
  typename Op::acc_t tail;  // its partial
};

template <class Op, class T>
__device__ __forceinline__ range_result<Op, T> walk_range(
    const Op& op, const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
    gk_i64 shift, gk_i64 k0, gk_i64 k1, gk_i64 ntiles, gk_i64 p, gk_i64 qlo, gk_i64 qhi,
    unsigned* headbits, int* hid, typename Op::out_t* __restrict__ out) {
  typedef typename Op::acc_t A;
  constexpr int ITEMS = tile_shape<T>::ITEMS;
  const int W = warpSize, lane = gk_lane();
  const gk_i64 E = (gk_i64)W * ITEMS;

  range_result<Op, T> res;
  res.lead = op.identity();
  res.lead_closed = false;
  gk_i64 carry_id = -1;  // list of the open run (-1: the lead)
  A carry = op.identity();

  T v[ITEMS], nv[ITEMS];
  load_items<T, ITEMS>(v, content_al, shift, k0 * E - shift + (gk_i64)lane * ITEMS, qlo, qhi);
  // the first GK_PREFETCH_BATCHES batches of offsets of the next tile's lists, loaded ahead
  gk_i64 s_pre[GK_PREFETCH_BATCHES], e_pre[GK_PREFETCH_BATCHES];
#pragma unroll
  for (int b = 0; b < GK_PREFETCH_BATCHES; ++b) load_batch(off, n, p + b * W, s_pre[b], e_pre[b]);

  for (gk_i64 k = k0; k < k1; ++k) {
    const gk_i64 tb = k * E - shift;
    const gk_i64 te = tb + E;
    const gk_i64 a0 = tb + (gk_i64)lane * ITEMS;
    if (k + 1 < k1) load_items<T, ITEMS>(nv, content_al, shift, a0 + E, qlo, qhi);
    if (GK_PREFETCH_TILES > 1 && k + GK_PREFETCH_TILES < k1) {
      const gk_i64 ap = a0 + GK_PREFETCH_TILES * E;
      if (ap < qhi) gk_prefetch_l2(content_al + (ap + shift));
      // the offsets just past the two batches the next tile loads (128-byte lines)
      const gk_i64 rp = p + 2 * (gk_i64)W + lane * (gk_i64)(128 / sizeof(gk_i64));
      if (lane < 4 && rp <= n) gk_prefetch_l2(off + rp);
    }

    headbits[lane] = 0u;
    gk_syncwave();
    // Heads of the lists starting in this tile; empty lists are complete right here.
    const bool last_tile = (k == ntiles - 1);
    gk_i64 q = p;
    gk_i64 s = s_pre[0], e = e_pre[0];
    for (int batch = 1;; ++batch) {
      const bool exists = q + lane < n;
      const bool in = exists && (last_tile || s < te);
      const bool nonempty = in && e > s;
      if (in && !nonempty) out[q + lane] = op.empty();
      if (nonempty) {
        const int rel = (int)(s - tb);
        const int owner = rel / ITEMS, j = rel - owner * ITEMS;
        hid[j * W + owner] = (int)(q + lane - p);
        atomicOr(&headbits[owner], 1u << j);
      }
      const int cnt = __popcll(gk_ballot(in));
      q += cnt;
      if (cnt < W) break;
      if (batch < GK_PREFETCH_BATCHES) {
#pragma unroll
        for (int b = 1; b < GK_PREFETCH_BATCHES; ++b) {
          if (b == batch) { s = s_pre[b]; e = e_pre[b]; }
        }
      } else {
        load_batch(off, n, q, s, e);
      }
    }
    const gk_i64 p_next = q;
#pragma unroll
    for (int b = 0; b < GK_PREFETCH_BATCHES; ++b)  // the next tile's first batches
      load_batch(off, n, p_next + b * W, s_pre[b], e_pre[b]);
    gk_syncwave();

    // This lane's elements in order.
    const unsigned hb = headbits[lane];
    A acc = op.identity(), first = op.identity();
    int cur = -1;
    const bool full = a0 >= qlo && a0 + ITEMS <= qhi;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const bool head = (hb >> j) & 1u;
      if (head) {
        const int h = hid[j * W + lane];
        if (cur >= 0) {
          out[p + cur] = op.finalize(acc, off, p + cur);  // run closed inside this lane
        } else {
          first = acc;
        }
        cur = h;
        acc = op.identity();
      }
      const gk_i64 a = a0 + j;
      if (full || (a >= qlo && a < qhi)) acc = op.fold(acc, v[j], a, head);
    }

    if (p_next == p) {
      // No list starts in this tile (inside a long list): the whole tile continues the
      // open run; a plain ordered wave reduction replaces the segmented scan.
      carry = op.combine(carry, wave_reduce<Op>(op, acc));
#pragma unroll
      for (int j = 0; j < ITEMS; ++j) v[j] = nv[j];
      continue;
    }
    // Segmented scan across lanes: the run open before each lane (id -1: the carry).
    int iid = cur;
    A iacc = acc;
    for (int d = 1; d < W; d <<= 1) {
      const int uid = gk_shfl_up(iid, d);
      const A uacc = shfl<A>::up(iacc, d);
      if (lane >= d && iid < 0) {
        iacc = op.combine(uacc, iacc);
        iid = uid;
      }
    }
    int eid = gk_shfl_up(iid, 1);
    A eacc = shfl<A>::up(iacc, 1);
    if (lane == 0) {
      eid = -1;
      eacc = op.identity();
    }
    if (cur >= 0) {
      const A pre = op.combine(eacc, first);  // the run open before this lane ends here
      if (eid >= 0) {
        out[p + eid] = op.finalize(pre, off, p + eid);
      } else {
        const A closed = op.combine(carry, pre);
        if (carry_id >= 0) {
          out[carry_id] = op.finalize(closed, off, carry_id);
        } else {
          res.lead = closed;  // only this lane records it; fixed up below
        }
      }
    }
    // the lead is complete once any lane saw a head in this range
    const gk_lanemask_t heads = gk_ballot(cur >= 0);
    if (carry_id < 0 && heads != 0) {
      const int firstlane = __ffsll((long long)heads) - 1;
      res.lead = shfl<A>::idx(res.lead, firstlane);
      res.lead_closed = true;
    }
    // the run open at the tile end becomes the carry
    const int tid_ = gk_shfl(iid, W - 1);
    const A tacc = shfl<A>::idx(iacc, W - 1);
    if (tid_ >= 0) {
      carry_id = p + tid_;
      carry = tacc;
    } else {
      carry = op.combine(carry, tacc);
    }
    p = p_next;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] = nv[j];
    gk_syncwave();
  }
  if (!res.lead_closed) res.lead = carry;  // no list starts in this range
  res.tail_list = carry_id;
  res.tail = carry;
  return res;
}

// Finish list r (whose partial is acc) by reading on from position from to its end, a
// wave-tile at a time, in order.
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_t walk_on(const Op& op, const gk_i64* off,
                                                      const T* content_al, gk_i64 shift,
                                                      gk_i64 from, gk_i64 end, gk_i64 qlo,
                                                      typename Op::acc_t acc) {
  typedef typename Op::acc_t A;
  constexpr int ITEMS = tile_shape<T>::ITEMS;
  const int W = warpSize, lane = gk_lane();
  const gk_i64 E = (gk_i64)W * ITEMS;
  for (gk_i64 rb = from; rb < end; rb += E) {
    T w[ITEMS];
    const gk_i64 b0 = rb + (gk_i64)lane * ITEMS;
    load_items<T, ITEMS>(w, content_al, shift, b0, qlo, end);
    A part = op.identity();
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      if (b0 + j < end) part = op.fold(part, w[j], b0 + j, false);
    }
    acc = op.combine(acc, wave_reduce<Op>(op, part));
  }
  return acc;
}

}  // namespace gk

#endif  // GK_REDUCE_FLAT_WALK_CUH
