// The reduction ops (identity, leaf, combine, fold, merge) and the order-preserving wave
// combines every reduction kernel uses (docs/gpu-reduction.md).
#ifndef GK_REDUCE_OPS_CUH
#define GK_REDUCE_OPS_CUH

#include "portability.cuh"

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
// sum (PROD false) and prod (PROD true): identity 0 or 1, combine by + or *.
template <class T, bool PROD> struct Arith {
  typedef typename arith<T>::acc acc_t;
  typedef typename arith<T>::out out_t;
  __device__ Arith(gk_u64) {}
  __device__ acc_t identity() const { return acc_t(PROD ? 1 : 0); }
  __device__ acc_t leaf(T x, gk_i64, bool) const { return acc_t(x); }
  __device__ acc_t combine(acc_t l, acc_t r) const { return PROD ? l * r : l + r; }
  __device__ acc_t fold(acc_t a, T x, gk_i64 p, bool h) const { return combine(a, leaf(x, p, h)); }
  __device__ acc_t merge(acc_t l, acc_t r) const { return combine(l, r); }
  __device__ bool redo(acc_t) const { return false; }
  __device__ out_t finalize(acc_t a, const gk_i64*, gk_i64) const { return out_t(a); }
  __device__ out_t empty() const { return out_t(PROD ? 1 : 0); }
};
template <class T> using Sum = Arith<T, false>;
template <class T> using Prod = Arith<T, true>;

// x != 0 for floats as an integer test of the bits without the sign (NaN is non-zero, -0.0
// is zero), faster than the float compare (docs/gpu-reduction.md#kernel-notes)
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

// Unordered wave merge (Op::merge) of interleaved lane shares; the result in every lane.
template <class Op>
__device__ __forceinline__ typename Op::acc_t wave_merge(const Op& op, typename Op::acc_t a) {
  typedef typename Op::acc_t A;
  for (int d = warpSize / 2; d > 0; d >>= 1) a = op.merge(a, shfl<A>::down(a, d));
  return shfl<A>::idx(a, 0);
}

}  // namespace gk

// the parameters of every per-list kernel (one 8-byte argument each, reduce_dispatch.py)
#define GK_PER_LIST_PARAMS(OP, T)                                                                    \
  const gk_i64 *off, gk_i64 n, const T *content_al, gk_i64 shift, gk_i64 ntiles, gk_i64 R,           \
      gk_u64 ident, OP<T>::out_t *out, unsigned char *empty

// extern "C" per-list entry point gk_<op>_<dtype>_<NAME>, calling gk::BODY
#define GK_EMIT_PER_LIST(OPN, DT, OP, T, NAME, BODY)                                                 \
  extern "C" __global__ void GK_LB gk_##OPN##_##DT##_##NAME(GK_PER_LIST_PARAMS(OP, T)) {             \
    gk::BODY<OP<T>, T>(off, n, content_al, shift, ident, out, empty);                                \
  }

#endif  // GK_REDUCE_OPS_CUH
