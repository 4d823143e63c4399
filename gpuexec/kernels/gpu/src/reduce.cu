// Segmented reductions over the innermost lists of a jagged array (one portable source for
// CUDA and HIP; all vendor differences live in portability.cuh).
//
// Buffers: offsets int64[n+1] (may start above 0), content T[...]. The host passes the
// content pointer rounded down to 16 bytes ("content_al") and the element shift so that
// content[a] == content_al[a + shift]; tiles are laid out from content_al so that every
// per-thread chunk starts on a vector boundary (vector loads that overlap the valid range
// stay inside the allocation because allocations are 16-byte aligned and padded).
//
// Flattened mapping ("loop flattening"): a tile of GK_BLOCK * ITEMS consecutive content
// elements goes to one block; each thread loads ITEMS consecutive elements with vector
// loads and reduces the runs of equal list id in order; runs that cross threads are joined
// by an order-preserving segmented block scan. Every list is owned by the tile holding its
// first element (empty lists by the tile holding their position). A list that continues
// past its owner tile is finished either by
//   split: a partition pass (tile -> first owned list, wave-cooperative search), the
//          reduce pass (writes a carry-out record per tile) and a fixup pass that folds the
//          carried partials in list order (three launches, no atomics), or
//   fused: one persistent launch; each block searches once, walks its tiles in order and
//          finishes its own last list by reading on past the tile end.
//   naive: one thread per list (the "direct port" baseline, also used by benchmarks).
// Combines are applied strictly left to right within a list (never commuted), so
// min/max keep the first of equal values (0.0 vs -0.0) and argmin/argmax the first index,
// exactly like awkward's sequential kernels.

#include "portability.cuh"

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
// type traits (no <type_traits> under NVRTC/hiprtc without the standard library)
template <class T> struct traits;
#define GK_TRAITS(T, P, SIGNED, FLOAT)                     \
  template <> struct traits<T> {                           \
    typedef P promoted;                                    \
    static constexpr bool is_signed = SIGNED;              \
    static constexpr bool is_float = FLOAT;                \
  };
GK_TRAITS(signed char, int, true, false)
GK_TRAITS(short, int, true, false)
GK_TRAITS(int, int, true, false)
GK_TRAITS(long long, long long, true, false)
GK_TRAITS(unsigned char, unsigned, false, false)
GK_TRAITS(unsigned short, unsigned, false, false)
GK_TRAITS(unsigned, unsigned, false, false)
GK_TRAITS(unsigned long long, unsigned long long, false, false)
GK_TRAITS(float, float, true, true)
GK_TRAITS(double, double, true, true)
#undef GK_TRAITS

template <bool C, class A, class B> struct pick { typedef A type; };
template <class A, class B> struct pick<false, A, B> { typedef B type; };

// sum/prod: integers accumulate modulo 2^64 in unsigned arithmetic (no signed-overflow UB),
// then land in int64 (signed and bool inputs) or uint64; floats keep their dtype.
template <class T> struct arith {
  typedef typename pick<traits<T>::is_float, T, gk_u64>::type acc;
  typedef typename pick<traits<T>::is_float, T,
                        typename pick<traits<T>::is_signed, gk_i64, gk_u64>::type>::type out;
};

// ---------------------------------------------------------------------------------------
// Operations. leaf(x, pos, head): the accumulator of one element at absolute position pos
// (head: pos is the first element of its list); combine(l, r): l holds earlier elements;
// fold(a, x, pos, head) == combine(a, leaf(x, pos, head)) (argmin/argmax fold directly).
// merge(l, r): combine of two accumulators whose elements interleave (lanes that each folded
// every W-th stretch of a list); redo(a): whether such a merged result may differ from the
// ordered one and the list must be reduced again in order (only min/max of floats: equal
// zeros of either sign).
template <class T> struct Sum {
  typedef typename arith<T>::acc acc_t;
  typedef typename arith<T>::out out_t;
  __device__ Sum(gk_u64) {}
  __device__ acc_t identity() const { return acc_t(0); }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return acc_t(x); }
  __device__ acc_t combine(acc_t l, acc_t r) const { return l + r; }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool h) const { return combine(a, leaf(x, p, h)); }
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return out_t(0); }
};

template <class T> struct Prod {
  typedef typename arith<T>::acc acc_t;
  typedef typename arith<T>::out out_t;
  __device__ Prod(gk_u64) {}
  __device__ acc_t identity() const { return acc_t(1); }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return acc_t(x); }
  __device__ acc_t combine(acc_t l, acc_t r) const { return l * r; }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool h) const { return combine(a, leaf(x, p, h)); }
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return out_t(1); }
};

// x != 0 for floats as an integer test of the bits without the sign (NaN is non-zero, -0.0
// is zero): the float compare made count_nonzero of float64 slower than of int64 on the H200
template <class T> __device__ __forceinline__ bool nonzero(T x) { return x != T(0); }
template <> __device__ __forceinline__ bool nonzero<float>(float x) {
  union { float f; unsigned u; } b; b.f = x; return (b.u << 1) != 0u;
}
template <> __device__ __forceinline__ bool nonzero<double>(double x) {
  union { double f; gk_u64 u; } b; b.f = x; return (b.u << 1) != 0ull;
}

// counts of non-zero elements (NaN counts, -0.0 does not); sum of bools is the same count
template <class T> struct CountNonzero {
  typedef gk_u64 acc_t;
  typedef gk_i64 out_t;
  __device__ CountNonzero(gk_u64) {}
  __device__ acc_t identity() const { return 0; }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return nonzero(x) ? 1 : 0; }
  __device__ acc_t combine(acc_t l, acc_t r) const { return l + r; }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool h) const { return combine(a, leaf(x, p, h)); }
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return 0; }
};

// any / all (bool out); prod of bools is "all" as int64
template <class T, class O, unsigned IDENT> struct Logic {
  typedef unsigned acc_t;
  typedef O out_t;
  __device__ Logic(gk_u64) {}
  __device__ acc_t identity() const { return IDENT; }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return nonzero(x) ? 1u : 0u; }
  __device__ acc_t combine(acc_t l, acc_t r) const { return IDENT ? (l & r) : (l | r); }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool h) const { return combine(a, leaf(x, p, h)); }
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return out_t(IDENT); }
};
template <class T> struct Any : Logic<T, unsigned char, 0u> { __device__ Any(gk_u64 b) : Logic<T, unsigned char, 0u>(b) {} };
template <class T> struct All : Logic<T, unsigned char, 1u> { __device__ All(gk_u64 b) : Logic<T, unsigned char, 1u>(b) {} };
template <class T> struct ProdBool : Logic<T, gk_i64, 1u> { __device__ ProdBool(gk_u64 b) : Logic<T, gk_i64, 1u>(b) {} };
template <class T> struct SumBool : CountNonzero<T> { __device__ SumBool(gk_u64 b) : CountNonzero<T>(b) {} };

// min/max with the caller's identity (what empty lists get). NaN never wins (awkward's
// "x < acc ? x : acc" loop): a NaN leaf is the identity. Ties keep the earlier value.
template <class T, bool MAX> struct Extremum {
  typedef typename traits<T>::promoted acc_t;
  typedef T out_t;
  acc_t ident;
  __device__ Extremum(gk_u64 bits) : ident(acc_t(gk_from_bits<T>(bits))) {}
  __device__ acc_t identity() const { return ident; }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return gk_isnan(x) ? ident : acc_t(x); }
  __device__ acc_t combine(acc_t l, acc_t r) const { return (MAX ? (r > l) : (r < l)) ? r : l; }
  // fold(acc, x) == combine(acc, leaf(x)) for an accumulator started at the identity: it
  // never passes the identity, so a NaN (the identity as a leaf) cannot win, and a NaN
  // fails the comparison by itself (one compare and select per element instead of two)
  __device__ acc_t fold(acc_t a, T x, gk_i64, bool) const {
    const acc_t v = acc_t(x);
    return (MAX ? (v > a) : (v < a)) ? v : a;
  }
  // equal values have equal bits except 0.0 and -0.0: which comes first decides
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t a) const { return traits<T>::is_float && a == acc_t(0); }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return out_t(ident); }
};
template <class T> struct Min : Extremum<T, false> { __device__ Min(gk_u64 b) : Extremum<T, false>(b) {} };
template <class T> struct Max : Extremum<T, true> { __device__ Max(gk_u64 b) : Extremum<T, true>(b) {} };
// whether Op::redo may be true (min/max of floats): the compiler cannot see through the
// ballots that gather redo's answers, so kernels that have no second walk say so
template <class Op> struct may_redo { static constexpr bool value = false; };
template <class T> struct may_redo<Min<T>> { static constexpr bool value = traits<T>::is_float; };
template <class T> struct may_redo<Max<T>> { static constexpr bool value = traits<T>::is_float; };

// argmin/argmax: (value, absolute position); idx < 0 is "nothing yet", with the worst value
// of the promoted type (-inf / lowest for max, +inf / highest for min). awkward takes a
// list's first element unconditionally and then replaces only on a strict improvement.
// Here the head is always taken and any other element only when it compares strictly
// better; a comparison with NaN never holds, so a NaN head sticks and a later NaN is never
// taken, not even over the empty accumulator. A later element equal to the worst value is
// never taken either: harmless, since the list's head is taken and is at least as good.
// fold is one compare and select per element; combine also takes r over an empty l (the
// lanes before a list's head within a wave-tile).
template <class P> struct worst;
#define GK_WORST(P, LO, HI)                                   \
  template <> struct worst<P> {                               \
    __device__ static P lo() { return LO; }                   \
    __device__ static P hi() { return HI; }                   \
  };
GK_WORST(int, -2147483647 - 1, 2147483647)
GK_WORST(long long, -9223372036854775807LL - 1, 9223372036854775807LL)
GK_WORST(unsigned, 0u, 0xffffffffu)
GK_WORST(unsigned long long, 0ull, 0xffffffffffffffffull)
GK_WORST(float, gk_from_bits<float>(0xff800000ull), gk_from_bits<float>(0x7f800000ull))
GK_WORST(double, gk_from_bits<double>(0xfff0000000000000ull),
         gk_from_bits<double>(0x7ff0000000000000ull))
#undef GK_WORST

template <class P> struct ArgAcc { P v; gk_i64 idx; };
template <class T, bool MAX> struct ArgExtremum {
  typedef typename traits<T>::promoted P;
  typedef ArgAcc<P> acc_t;
  typedef gk_i64 out_t;
  __device__ ArgExtremum(gk_u64) {}
  __device__ static bool better(P x, P than) { return MAX ? (x > than) : (x < than); }
  __device__ acc_t identity() const {
    acc_t a; a.v = MAX ? worst<P>::lo() : worst<P>::hi(); a.idx = -1; return a;
  }
  __device__ acc_t combine(acc_t l, acc_t r) const {
    return (l.idx < 0 || better(r.v, l.v)) ? r : l;
  }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool head) const {
    const P v = P(x);
    if (head || better(v, a.v)) { a.v = v; a.idx = p; }
    return a;
  }
  // interleaved shares: a NaN accumulator is the list's head (a later NaN is never taken)
  // and wins; otherwise the better value, and of equal values the earlier position
  __device__ acc_t merge(acc_t l, acc_t r) const {
    if (l.idx < 0 || gk_isnan(r.v)) return (r.idx < 0) ? l : r;
    if (r.idx < 0 || gk_isnan(l.v)) return l;
    return (better(r.v, l.v) || (!better(l.v, r.v) && r.idx < l.idx)) ? r : l;
  }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64* off, gk_i64 list) const {
    return a.idx < 0 ? -1 : a.idx - off[list];
  }
  __device__ out_t empty() const { return -1; }
};
template <class T> struct ArgMin : ArgExtremum<T, false> { __device__ ArgMin(gk_u64 b) : ArgExtremum<T, false>(b) {} };
template <class T> struct ArgMax : ArgExtremum<T, true> { __device__ ArgMax(gk_u64 b) : ArgExtremum<T, true>(b) {} };

// wave shuffles of accumulators (scalars directly, pairs field by field)
template <class A> struct shfl {
  __device__ static A up(A a, int d) { return gk_shfl_up(a, d); }
  __device__ static A down(A a, int d) { return gk_shfl_down(a, d); }
  __device__ static A idx(A a, int l) { return gk_shfl(a, l); }
};
template <class P> struct shfl<ArgAcc<P> > {
  __device__ static ArgAcc<P> up(ArgAcc<P> a, int d) {
    ArgAcc<P> b; b.v = gk_shfl_up(a.v, d); b.idx = gk_shfl_up(a.idx, d); return b;
  }
  __device__ static ArgAcc<P> down(ArgAcc<P> a, int d) {
    ArgAcc<P> b; b.v = gk_shfl_down(a.v, d); b.idx = gk_shfl_down(a.idx, d); return b;
  }
  __device__ static ArgAcc<P> idx(ArgAcc<P> a, int l) {
    ArgAcc<P> b; b.v = gk_shfl(a.v, l); b.idx = gk_shfl(a.idx, l); return b;
  }
};

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

// Order-preserving wave reduction; the result is returned to every lane.
template <class Op>
__device__ __forceinline__ typename Op::acc_t wave_reduce(const Op& op, typename Op::acc_t a) {
  typedef typename Op::acc_t A;
  const int W = warpSize, lane = gk_lane();
  for (int d = 1; d < W; d <<= 1) {
    const A o = shfl<A>::down(a, d);
    if ((lane & (2 * d - 1)) == 0 && lane + d < W) a = op.combine(a, o);
  }
  return shfl<A>::idx(a, 0);
}

// One batch of list bounds: lane l gets (off[q + l], off[q + l + 1]). (Taking the end from
// the next lane's start by a shuffle saves a load but lengthened the per-tile chain: slower
// on the H200.)
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

// ---------------------------------------------------------------------------------------
// kernel bodies (the extern "C" entry points below instantiate them per op and dtype).
// Waves are numbered globally; wave w walks wave-tiles [R_w, R_{w+1}) with
// R_w = w * ntiles / R.

__device__ __forceinline__ gk_i64 global_wave() {
  return (gk_i64)blockIdx.x * (GK_BLOCK / warpSize) + gk_wave();
}

// split, pass 1: P[w] = first list whose first element is at or after range w's start.
__device__ void partition_body(const gk_i64* __restrict__ off, gk_i64 n, gk_i64 shift, gk_i64 E,
                               gk_i64 ntiles, gk_i64 R, gk_i64* __restrict__ P) {
  const gk_i64 w = global_wave();
  if (w >= R) return;  // whole waves leave together
  const gk_i64 p = wave_lower_bound(off, n, range_start(w, ntiles, R) * E - shift);
  if (gk_lane() == 0) P[w] = p;
}

// split, pass 2: each wave walks its range and writes its lead and tail records.
template <class Op, class T>
__device__ __forceinline__ void split_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_u64 ident,
                           const gk_i64* __restrict__ P, typename Op::acc_t* lead_acc,
                           typename Op::acc_t* tail_acc, gk_i64* tail_list,
                           typename Op::out_t* __restrict__ out) {
  __shared__ smem_t sm;
  const gk_i64 w = global_wave();
  if (w >= R) return;
  const Op op(ident);
  const int W = warpSize;
  const gk_i64 E = (gk_i64)W * tile_shape<T>::ITEMS;
  const gk_i64 k0 = range_start(w, ntiles, R), k1 = range_start(w + 1, ntiles, R);
  const gk_i64 qlo = off[0], qhi = off[n];
  range_result<Op, T> res = walk_range<Op, T>(
      op, off, n, content_al, shift, k0, k1, ntiles, P[w], qlo, qhi,
      sm.headbits + gk_wave() * W, sm.hid + gk_wave() * W * tile_shape<T>::ITEMS, out);
  if (gk_lane() == 0) {
    lead_acc[w] = res.lead;
    gk_i64 tl = -1;
    if (res.tail_list >= 0) {
      if (off[res.tail_list + 1] <= k1 * E - shift) {
        out[res.tail_list] = op.finalize(res.tail, off, res.tail_list);
      } else {
        tl = res.tail_list;
        tail_acc[w] = res.tail;
      }
    }
    tail_list[w] = tl;
  }
}

// split, pass 3: fold the partials of lists that continued past their range.
template <class Op, class T>
__device__ void fixup_body(const gk_i64* __restrict__ off, gk_i64 n, gk_i64 shift, gk_i64 ntiles,
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

// fused: one launch; each wave searches its start, walks its range and finishes its last
// list by reading on past the range end.
template <class Op, class T>
__device__ __forceinline__ void fused_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_u64 ident,
                           typename Op::out_t* __restrict__ out) {
  __shared__ smem_t sm;
  const gk_i64 w = global_wave();
  if (w >= R) return;
  const Op op(ident);
  const int W = warpSize;
  const gk_i64 E = (gk_i64)W * tile_shape<T>::ITEMS;
  const gk_i64 k0 = range_start(w, ntiles, R), k1 = range_start(w + 1, ntiles, R);
  const gk_i64 qlo = off[0], qhi = off[n];
  const gk_i64 p0 = wave_lower_bound(off, n, k0 * E - shift);
  range_result<Op, T> res = walk_range<Op, T>(
      op, off, n, content_al, shift, k0, k1, ntiles, p0, qlo, qhi,
      sm.headbits + gk_wave() * W, sm.hid + gk_wave() * W * tile_shape<T>::ITEMS, out);
  if (res.tail_list >= 0) {
    const gk_i64 r = res.tail_list;
    const gk_i64 end = off[r + 1];
    const gk_i64 range_end = k1 * E - shift;
    typename Op::acc_t acc = res.tail;
    if (end > range_end) acc = walk_on<Op, T>(op, off, content_al, shift, range_end, end, qlo, acc);
    if (gk_lane() == 0) out[r] = op.finalize(acc, off, r);
  }
}

// naive: one thread per list, walking it element by element (the direct port).
template <class Op, class T>
__device__ void naive_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
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

// tiled: one list per thread like naive, but the block first stages the content span of
// its GK_BLOCK lists in shared memory, GK_TILE_BYTES at a time, with coalesced 128-bit
// loads (consecutive threads read consecutive vectors), and each thread then reduces its
// own list from there, left to right as naive does. On short lists naive's loads are
// strided across a wave (one list per lane), so each load instruction touches many lines.
#ifndef GK_TILE_BYTES
#define GK_TILE_BYTES 16384
#endif
// Fold this thread's list [s, e) (content_al positions), clamped to the staged run ``tile``
// that holds positions [base, end), into ``acc``, in 32-bit run-relative indices (the
// tiled kernel runs at full occupancy: 32 registers per thread). The list's head, when in
// this run, is the thread's first element here: folded first, so the loop itself tests
// nothing (the arg-reductions spilled at 32 registers with the test inside). Unrolled 4
// times, the shared-memory reads of four elements are issued before their (ordered)
// folds: min/max over Poisson(5) lists 0.314 -> 0.305 ms on the H200, sum unchanged.
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

template <class Op, class T>
__device__ void tiled_body(const gk_i64* __restrict__ off, gk_i64 n, const T* __restrict__ content_al,
                           gk_i64 shift, gk_u64 ident, typename Op::out_t* __restrict__ out,
                           unsigned char* __restrict__ empty) {
  constexpr int VEC = 16 / (int)sizeof(T);
  constexpr gk_i64 TILE = GK_TILE_BYTES / (gk_i64)sizeof(T);  // a whole number of vectors
  __shared__ gk_vec16 stage[GK_TILE_BYTES / 16];
  const T* tile = reinterpret_cast<const T*>(stage);
  const gk_i64 first = (gk_i64)blockIdx.x * GK_BLOCK;
  const gk_i64 last = (first + GK_BLOCK < n ? first + GK_BLOCK : n);  // lists [first, last)
  const gk_i64 r = first + threadIdx.x;
  const bool mine = r < n;
  const Op op(ident);
  // positions in content_al (element a of the content is content_al[a + shift]); the span
  // starts on a vector boundary (content_al is 16-byte aligned, allocations are padded)
  const gk_i64 s = mine ? off[r] + shift : 0, e = mine ? off[r + 1] + shift : 0;
  const gk_i64 S = ((off[first] + shift) / VEC) * VEC, E = off[last] + shift;
  const gk_vec16* src = reinterpret_cast<const gk_vec16*>(content_al);
  typename Op::acc_t acc = op.identity();
  for (gk_i64 base = S; base < E; base += TILE) {
    const gk_i64 count = (E - base < TILE ? E - base : TILE);
    const int nvec = (int)((count + VEC - 1) / VEC);
    __syncthreads();  // the previous tile is no longer read
    // 4 loads in flight per thread; fully unrolled the loop needs 90+ registers
#pragma unroll 4
    for (int i = threadIdx.x; i < nvec; i += GK_BLOCK) stage[i] = src[base / VEC + i];
    __syncthreads();
    acc = fold_staged<Op, T>(op, acc, tile, base, base + count, shift, s, e);
  }
  if (!mine) return;
  out[r] = (s == e) ? op.empty() : op.finalize(acc, off, r);
  if (empty) empty[r] = (s == e);
}

// hybrid: a wave takes W consecutive lists (one batch). A list of at most GK_LONG_LIST
// elements is reduced by its own lane, like naive; a medium one by a group of lanes
// (GK_HYBRID_GROUP, below); a longer one by the whole wave, one after another, streaming
// it in wave-tiles of W * GK_HYBRID_ITEM_BYTES with 128-bit loads (lane-folded, or an
// ordered wave reduction per tile). On mixed lengths (many short lists, a few long
// ones holding most of the content) neither per-list mapping alone serves: one thread per
// list serialises the long lists, one wave per list idles on the short ones; the flattened
// walk serves both but its segmented scan costs registers. This kernel keeps registers
// low (its own launch bound, GK_HYBRID_MIN_BLOCKS) so that many waves are in flight.
// (Tried on the H200 and dropped: asking the next long list into L2 while streaming the
// current one, and a test-free loop for tiles wholly inside the list: mixed-length sum
// fell from 78.5 % to 60 % of copy bandwidth. Sixteenth session, mixed lengths, % of copy:
// asking the next long list's first tile before merging the lanes of the last one, +0.3
// to +1.3 points on seven cells and -5.9 on int64 sum; two or four batches per wave, each
// lane loading the bounds and first elements of all its lists before folding any, 2 to
// 12 points slower on all eight. Thirty-third session, each slower on mixed lengths and on
// Poisson(300): a wave's long lists streamed as one run of vectors, separate blocks for the
// short and the longer lists, a persistent grid, and the long lists through a cp.async ring
// in shared memory; docs/gpu-engine.md. Thirty-fourth session: a block's longest lists
// queued in shared memory and taken by whichever wave is free, +1.4 to +6.9 points on mixed
// lengths but -13 on Poisson(2000) float64 sum, where ptxas compiled the queue's copy of
// stream_list to fold each tile's first vector before issuing its other loads
// (benchmarks/sass_load_order.py); straight-line loads fixed that order but spilled.
// Thirty-fifth session: waves given lists by equal ranges of content (one batch or several
// per wave), 4-7 points slower on mixed lengths and 10-25 on Poisson(100). That change also
// showed that moving the batch body into a function of its own flipped ptxas' load order
// in the shipped kernel (-12 points): the sm_90 compile gate now checks it, .ci/gates/sass.py.
// Thirty-sixth session: the shared queue ships as a kernel of its own, "shared", below.)
#ifndef GK_LONG_LIST
#define GK_LONG_LIST 32
#endif
#ifndef GK_HYBRID_ITEM_BYTES
#define GK_HYBRID_ITEM_BYTES 64
#endif
#ifndef GK_HYBRID_MIN_BLOCKS
#define GK_HYBRID_MIN_BLOCKS 4
#endif
// its own block size: a block's slots are freed only when its slowest wave ends, and the
// waves of a block differ in work by the long lists their batches hold
#ifndef GK_HYBRID_BLOCK
#define GK_HYBRID_BLOCK GK_BLOCK
#endif
static_assert(GK_HYBRID_BLOCK % 64 == 0, "block sizes must be multiples of 64");
// Lane-folded streaming (GK_HYBRID_LANE_FOLD): each lane keeps its accumulator across the
// tiles of a list and the wave merges the lanes once per list, instead of an ordered wave
// reduction per tile, whose shuffle chain sits between one tile's loads and the next. The
// lanes' shares interleave, so the lanes are merged with Op::merge; where that may differ
// from the ordered result (Op::redo: min/max of floats at zero) the list is walked again
// in order. Float sums and products are then summed in another order (within the bound).
#ifndef GK_HYBRID_LANE_FOLD
#define GK_HYBRID_LANE_FOLD 1
#endif
// Interleaved lane folding (GK_HYBRID_INTERLEAVE, with GK_HYBRID_LANE_FOLD): the wave's
// lanes read consecutive 16-byte vectors, so each load instruction of the wave reads one
// contiguous run (512 bytes on 32 lanes), instead of each lane reading its own contiguous
// stretch of the tile (a load instruction then touches every lane's stretch, 16 of each 64
// bytes). A lane's positions still increase, so the lane merge is the same.
#ifndef GK_HYBRID_INTERLEAVE
#define GK_HYBRID_INTERLEAVE 0
#endif
// Short lists, one per lane: GK_HYBRID_SHORT_BATCH elements are loaded (guarded) before any
// is folded. In order issue, a load followed by its fold waits a memory latency per
// element; batched, a list of up to that many elements waits one.
#ifndef GK_HYBRID_SHORT_BATCH
#define GK_HYBRID_SHORT_BATCH 1
#endif
// Medium lists in groups (GK_HYBRID_GROUP = G > 1): a long list of at most half a
// wave-tile is reduced by G lanes, W / G such lists at a time, each group streaming its list
// in group-tiles of G * GK_HYBRID_ITEM_BYTES (interleaved, lane-folded, merged within the
// group); with G > 4 those that fit one tile of 4 lanes take 4 lanes, W / 4 at a time. The
// wave streams only the longer ones. Streamed by the whole wave, a list of 64
// float64 is one vector per lane, and a wave of such lists waits one memory latency per
// list (H200, 100M float64 in lists of 64: 26 % of a plain read, gpu_stream_probe.py).
#ifndef GK_HYBRID_GROUP
#define GK_HYBRID_GROUP 1
#endif
static_assert(GK_HYBRID_GROUP >= 1 && GK_HYBRID_GROUP <= 32 &&
              (GK_HYBRID_GROUP & (GK_HYBRID_GROUP - 1)) == 0,
              "GK_HYBRID_GROUP must be a power of two up to 32");
// Staged batches (the "staged" kernel: the hybrid one with this path first): a batch
// whose lists are at least GK_HYBRID_STAGE_MIN long for half of them, none longer than
// GK_HYBRID_STAGE_MAX, is read by the whole wave, in chunks of GK_HYBRID_STAGE bytes, one
// contiguous run of 128-bit loads into the wave's shared memory, and each lane folds its
// own list from there in order (as the tiled per-list kernel does for a block). One lane
// reading its list of 24 float64 from global memory touches a new cache line every few
// elements; the wave's run touches each line once. A kernel of its own: its shared memory
// takes L1 from the hybrid kernel's unstaged reads (H200, 100M float64, % of copy
// bandwidth, hybrid / with the staged path: Poisson(24) sum 79 / 90, argmax 66 / 80;
// Poisson(5) sum 78 / 76, on 1 % of lists of 100..2000 among Poisson(3) 89 / 81; the
// Poisson(5) batches, staged, 65). The table gives it the lengths where it gains.
#ifndef GK_HYBRID_STAGE
#define GK_HYBRID_STAGE 4096
#endif
#ifndef GK_HYBRID_STAGE_MIN
#define GK_HYBRID_STAGE_MIN 16
#endif
#ifndef GK_HYBRID_STAGE_MAX
#define GK_HYBRID_STAGE_MAX 96
#endif
static_assert(GK_HYBRID_STAGE % 16 == 0, "GK_HYBRID_STAGE must be a whole number of vectors");
template <class Op>
__device__ __forceinline__ typename Op::acc_t wave_merge(const Op& op, typename Op::acc_t a) {
  typedef typename Op::acc_t A;
  for (int d = warpSize / 2; d > 0; d >>= 1) a = op.merge(a, shfl<A>::down(a, d));
  return shfl<A>::idx(a, 0);
}
// 128-bit vectors per lane per wave-tile of a streamed list; at most 16 elements per lane
// (narrow types would otherwise unroll into more registers than the bound allows)
template <class T> struct stream_shape {
  static constexpr int VEC = 16 / (int)sizeof(T);
  static constexpr int NV_BYTES = GK_HYBRID_ITEM_BYTES / 16, NV_CAP = 16 / VEC;
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
  // wholly inside the list (without its head) folds with no test at all. Against a 64-bit
  // test per element (H200, mixed lengths, one sweep timed in turns): float64 max 79.9 ->
  // 82.1 % of copy, count_nonzero 80.3 -> 83.4, argmax 74.4 -> 77.9, int64 sum 75.7 -> 84.1
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
// L1::no_allocate, 4 ld.global.cs (evict first: each line is read once). The table's
// sm_* rows take 4: +4 points of copy bandwidth on mixed lengths on the H200
// (benchmarks/exp_stream_load.py). HIP always reads plainly (not measured on AMD).
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
#if GK_HYBRID_LANE_FOLD
  {
    // each lane folds its share of every tile (its vectors interleaved with the other
    // lanes', or its own stretch), one wave merge per list. With one vector per lane
    // (1-byte values) the two layouts read the same addresses: the stretch code runs
    constexpr bool interleaved = GK_HYBRID_INTERLEAVE && S::NV > 1;
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

#if GK_HYBRID_GROUP > 1 && GK_HYBRID_LANE_FOLD
// Reduce the lists of the lanes in ``mediums`` (bounds in s, e) in rounds, W / G at a time
// with G = GK_HYBRID_GROUP lanes each. Returns the lanes whose lists must be walked again
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

// A staged batch (GK_HYBRID_STAGE): the lists [q, min(q + W, n)), this lane's [s, e).
template <class Op, class T>
__device__ __forceinline__ void staged_batch(const Op& op, const gk_i64* __restrict__ off,
                                             gk_i64 n, const T* __restrict__ content_al,
                                             gk_i64 shift, gk_i64 q, gk_i64 s, gk_i64 e,
                                             typename Op::out_t* __restrict__ out) {
  constexpr int VEC = 16 / (int)sizeof(T);
  constexpr int NVEC = GK_HYBRID_STAGE / 16;          // vectors per chunk
  constexpr gk_i64 CHUNK = (gk_i64)NVEC * VEC;         // elements per chunk
  __shared__ gk_vec16 stage[GK_HYBRID_BLOCK / GK_MIN_WAVE_WIDTH][NVEC];
  gk_vec16* region = stage[gk_wave()];
  const T* chunk = reinterpret_cast<const T*>(region);
  const gk_vec16* src = reinterpret_cast<const gk_vec16*>(content_al);
  const int W = warpSize, lane = gk_lane();
  const gk_i64 r = q + lane, end_list = (q + W < n ? q + W : n);
  // the batch's content in content_al positions, from a vector boundary (content_al is
  // 16-byte aligned, allocations are padded)
  const gk_i64 S0 = ((off[q] + shift) / VEC) * VEC, E0 = off[end_list] + shift;
  const gk_i64 ls = s + shift, le = e + shift;
  typename Op::acc_t acc = op.identity();
  for (gk_i64 base = S0; base < E0; base += CHUNK) {
    const gk_i64 count = (E0 - base < CHUNK ? E0 - base : CHUNK);
    const int nvec = (int)((count + VEC - 1) / VEC);
    gk_wave_sync();  // the previous chunk is no longer read
#pragma unroll 4
    for (int i = lane; i < nvec; i += W) region[i] = src[base / VEC + i];
    gk_wave_sync();
    acc = fold_staged<Op, T>(op, acc, chunk, base, base + count, shift, ls, le);
  }
  if (r < n) out[r] = (s == e) ? op.empty() : op.finalize(acc, off, r);
}

// The "shared" kernel (SHARED, its own block size GK_SHARED_BLOCK): the hybrid kernel with
// the lists a whole wave would stream put in a queue in the block's shared memory once the
// waves have read their bounds (one barrier), and taken one at a time by whichever wave is
// free once its short and medium lists are done. With one batch per wave a block's slots
// are freed only when its slowest wave ends, the one whose batch held most long lists
// (H200, mixed lengths, float64 sum: 36.7 % achieved occupancy of the 50 % its registers
// allow, Nsight Compute). A list is still reduced by one wave in one order, so results are
// the hybrid kernel's. Every streamed list goes through the queue, so that the kernel holds
// one copy of the streaming loop (a second copy, for a wave's own long lists, was compiled
// to fold each tile's first vector before issuing the other loads: thirty-fourth session).
// The table runs it on a long tail with at least 2 % of the lists long (strategies.py,
// ``tail_lists``, ``tail_from``): with fewer, blocks rarely hold two and it loses.
#ifndef GK_SHARED_BLOCK
#define GK_SHARED_BLOCK GK_HYBRID_BLOCK
#endif
#ifndef GK_SHARED_MIN_BLOCKS
#define GK_SHARED_MIN_BLOCKS GK_HYBRID_MIN_BLOCKS
#endif
static_assert(GK_SHARED_BLOCK % 64 == 0, "block sizes must be multiples of 64");

// STAGED: the "staged" kernel (staged batches first, above); SHARED: the "shared" kernel
// (above); BLOCK: the kernel's block size
template <class Op, class T, bool STAGED, bool SHARED = false, int BLOCK = GK_HYBRID_BLOCK>
__device__ __forceinline__ void hybrid_body(const gk_i64* __restrict__ off, gk_i64 n,
                                            const T* __restrict__ content_al, gk_i64 shift,
                                            gk_u64 ident, typename Op::out_t* __restrict__ out,
                                            unsigned char* __restrict__ empty) {
  static_assert(!(STAGED && SHARED), "the staged kernel does not share");
  const int W = warpSize, lane = gk_lane();
  // this wave's batch: lists [q, q + W)
  const gk_i64 q = ((gk_i64)blockIdx.x * (BLOCK / W) + gk_wave()) * W;
  // whole waves leave together; in the shared kernel every wave reaches the block's
  // barrier (one past the end queues nothing and takes queued lists)
  if (!SHARED && q >= n) return;
  const gk_i64 r = q + lane;
  const bool mine = r < n;
  const gk_i64 s = mine ? off[r] : 0, e = mine ? off[r + 1] : 0;
  const Op op(ident);
  const bool is_long = e - s > GK_LONG_LIST;
  if (mine && empty) empty[r] = (s == e);
  if constexpr (STAGED) {
    // at least half of the batch's lists GK_HYBRID_STAGE_MIN long, none longer than
    // GK_HYBRID_STAGE_MAX: ballots over 32-bit lengths (a 64-bit span of the batch, kept
    // across the unstaged path, spilled that path's sums); the whole wave takes one path
    const int len = (int)(e - s < GK_HYBRID_STAGE_MAX + 1 ? e - s : GK_HYBRID_STAGE_MAX + 1);
    if (2 * __popcll(gk_ballot(len >= GK_HYBRID_STAGE_MIN)) >= __popcll(gk_ballot(mine)) &&
        gk_ballot(len > GK_HYBRID_STAGE_MAX) == 0) {
      staged_batch<Op, T>(op, off, n, content_al, shift, q, s, e, out);
      return;
    }
  }
  // the shared kernel's queue: wave w's streamed lists at [w * W, w * W + count[w]), in
  // lane order (their bounds, and the list's lane in the batch)
  constexpr int QUEUE = SHARED ? BLOCK : 1;
  __shared__ gk_i64 queue_s[QUEUE], queue_e[QUEUE];
  __shared__ int queue_lane[QUEUE], queue_count[SHARED ? BLOCK / GK_MIN_WAVE_WIDTH : 1];
  __shared__ int queue_next;
  if constexpr (SHARED) {
#if GK_HYBRID_GROUP > 1 && GK_HYBRID_LANE_FOLD
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
      for (gk_i64 a = s; a < e; a += GK_HYBRID_SHORT_BATCH) {
        T v[GK_HYBRID_SHORT_BATCH];
#pragma unroll
        for (int k = 0; k < GK_HYBRID_SHORT_BATCH; ++k)
          v[k] = (a + k < e) ? content_al[a + k + shift] : T(0);
#pragma unroll
        for (int k = 0; k < GK_HYBRID_SHORT_BATCH; ++k)
          if (a + k < e) acc = op.fold(acc, v[k], a + k, a + k == s);
      }
      out[r] = op.finalize(acc, off, r);
    }
  }
#if GK_HYBRID_GROUP > 1 && GK_HYBRID_LANE_FOLD
  // medium lists: long ones of at most half a wave-tile
  const bool is_medium = is_long && e - s <= (gk_i64)W * stream_shape<T>::ITEMS / 2;
  // (the shared kernel streams them from its queue)
  gk_lanemask_t longs = SHARED ? 0 : gk_ballot(is_long && !is_medium);
  // with groups over 4 lanes, those that fit one tile of 4 lanes take 4 lanes each, W / 4
  // lists at a time
  constexpr int SMALL_GROUP = GK_HYBRID_GROUP > 4 ? 4 : GK_HYBRID_GROUP;
  const bool is_small = SMALL_GROUP < GK_HYBRID_GROUP && is_medium &&
                        e - s <= SMALL_GROUP * stream_shape<T>::ITEMS;
  if (SMALL_GROUP < GK_HYBRID_GROUP)
    longs |= medium_lists<Op, T, SMALL_GROUP>(op, off, content_al, shift, s, e, q, out,
                                              gk_ballot(is_small));
  longs |= medium_lists<Op, T, GK_HYBRID_GROUP>(op, off, content_al, shift, s, e, q, out,
                                                gk_ballot(is_medium && !is_small));
#else
  gk_lanemask_t longs = SHARED ? 0 : gk_ballot(is_long);
#endif
  // (in the shared kernel only medium lists walked again in order, Op::redo: walked in
  // order at once, without a second copy of the lane-folded loop)
  if (SHARED && !may_redo<Op>::value) longs = 0;
  for (; longs != 0; longs &= longs - 1) {
    const int src = __ffsll((long long)longs) - 1;
    const gk_i64 ls = gk_shfl(s, src), le = gk_shfl(e, src);
    const typename Op::acc_t acc = SHARED ? walk_list<Op, T>(op, content_al, shift, ls, le)
                                          : stream_list<Op, T>(op, content_al, shift, ls, le);
    if (lane == 0) out[q + src] = op.finalize(acc, off, q + src);
  }
  if constexpr (SHARED) {
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

// ---------------------------------------------------------------------------------------
// extern "C" entry points: gk_<op>_<dtype>_<variant>. A compile unit selects one op
// (GK_OP_<NAME>) and one strategy (GK_VARIANT_SPLIT | GK_VARIANT_FUSED | GK_VARIANT_NAIVE).

#define GK_LB GK_LAUNCH_BOUNDS(GK_BLOCK, GK_MIN_BLOCKS)

#if defined(GK_VARIANT_SPLIT)
#if !defined(GK_OP_COUNT)
extern "C" __global__ void GK_LB gk_partition(const gk_i64* off, gk_i64 n, gk_i64 shift, gk_i64 E,
                                             gk_i64 ntiles, gk_i64 R, gk_i64* P) {
  gk::partition_body(off, n, shift, E, ntiles, R, P);
}
#endif
#define GK_EMIT(OPN, DT, OP, T)                                                                      \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_split(                                          \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, const gk_i64* P, OP<T>::acc_t* lead_acc, OP<T>::acc_t* tail_acc,                 \
      gk_i64* tail_list, OP<T>::out_t* out) {                                                        \
    gk::split_body<OP<T>, T>(off, n, content_al, shift, ntiles, R, ident, P, lead_acc, tail_acc,     \
                             tail_list, out);                                                        \
  }                                                                                                  \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_fixup(                                          \
      const gk_i64* off, gk_i64 n, gk_i64 shift, gk_i64 ntiles, gk_i64 R, gk_i64 E, gk_u64 ident,    \
      const OP<T>::acc_t* lead_acc, const OP<T>::acc_t* tail_acc, const gk_i64* tail_list,           \
      OP<T>::out_t* out) {                                                                           \
    gk::fixup_body<OP<T>, T>(off, n, shift, ntiles, R, E, ident, lead_acc, tail_acc, tail_list, out); \
  }
#elif defined(GK_VARIANT_FUSED)
#define GK_EMIT(OPN, DT, OP, T)                                                                      \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_fused(                                          \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out) {                                                             \
    gk::fused_body<OP<T>, T>(off, n, content_al, shift, ntiles, R, ident, out);                      \
  }
#elif defined(GK_VARIANT_NAIVE)
#define GK_EMIT(OPN, DT, OP, T)                                                                      \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_naive(                                          \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out, unsigned char* empty) {                                       \
    gk::naive_body<OP<T>, T>(off, n, content_al, shift, ident, out, empty);                          \
  }                                                                                                  \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_tiled(                                          \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out, unsigned char* empty) {                                       \
    gk::tiled_body<OP<T>, T>(off, n, content_al, shift, ident, out, empty);                          \
  }                                                                                                  \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_HYBRID_BLOCK, GK_HYBRID_MIN_BLOCKS) gk_##OPN##_##DT##_hybrid( \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out, unsigned char* empty) {                                       \
    gk::hybrid_body<OP<T>, T, false>(off, n, content_al, shift, ident, out, empty);                  \
  }                                                                                                  \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_HYBRID_BLOCK, GK_HYBRID_MIN_BLOCKS) gk_##OPN##_##DT##_staged( \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out, unsigned char* empty) {                                       \
    gk::hybrid_body<OP<T>, T, true>(off, n, content_al, shift, ident, out, empty);                   \
  }                                                                                                  \
  extern "C" __global__ void GK_LAUNCH_BOUNDS(GK_SHARED_BLOCK, GK_SHARED_MIN_BLOCKS) gk_##OPN##_##DT##_shared( \
      const gk_i64* off, gk_i64 n, const T* content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,       \
      gk_u64 ident, OP<T>::out_t* out, unsigned char* empty) {                                       \
    gk::hybrid_body<OP<T>, T, false, true, GK_SHARED_BLOCK>(off, n, content_al, shift, ident, out,   \
                                                            empty);                                  \
  }
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
