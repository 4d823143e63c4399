// Structural kernels (one portable source for CUDA and HIP): local_index, in-list
// argsort/sort, and the pair/triplet building behind ak.combinations and ak.cartesian.
// Contract: the docstring of gpuexec/kernels/cpu/structure.py (same names, same results).
//
// A compile unit selects one family (GK_FAMILY_*) and one strategy (GK_VARIANT_*):
//   LOCAL_INDEX   flattened over the content positions (split: partition pass + pass;
//                 fused: the pass searches its tile's first list); naive: thread per list.
//   COMBINATIONS  a list scan of the tuple counts (split: tiles -> scan_tiles -> down;
//                 fused: one pass with decoupled look-back), then a fill flattened over the
//                 output tuples: each thread unranks its first tuple and steps through the
//                 rest in lexicographic order. naive: one thread per list, nested loops.
//   SORT          stable in-list argsort/sort by element width; keys are the values mapped
//                 to unsigned integers in the requested order (NaN first, -0.0 == 0.0) and
//                 ties break on the in-list position, so every sorting network is stable.
//                 classify: lists > RANK_MAX go to a bucket (medium) or, > BITONIC_MAX, to
//                 the large bucket. Lists <= RANK_MAX: one thread per element computes its
//                 rank (flattened); medium: one block per list, bitonic network in shared
//                 memory; large: BITONIC_MAX chunks sorted in shared memory, then merge-path
//                 passes (every thread merges MERGE_ITEMS outputs). split launches rank and
//                 bitonic separately; fused runs both in one grid. naive: thread per list,
//                 bottom-up merge sort through global memory.
// Kernels validate nothing (the API layer does).

#include "flat.cuh"

#ifndef GK_ITEMS
#define GK_ITEMS 8
#endif
#define GK_LB GK_LAUNCH_BOUNDS(GK_BLOCK, GK_MIN_BLOCKS)

namespace gks {
using namespace gkf;

enum : int {
  ITEMS = GK_ITEMS,
  TILE = GK_BLOCK * ITEMS,
  RANK_MAX = 32,        // lists ranked by one thread per element
  BITONIC_MAX = 2048,   // lists (and chunks of larger ones) sorted in shared memory
  MERGE_ITEMS = 8,      // outputs per thread in a merge-path pass
};

// ---------------------------------------------------------------------------------------
// local_index
template <bool SEARCH>
__device__ __forceinline__ void local_index_flat(const gk_i64* __restrict__ off, gk_i64 n,
                                                 const gk_i64* __restrict__ P,
                                                 gk_i64* __restrict__ out) {
  __shared__ owner_smem<ITEMS> sm;
  const gk_i64 base = off[0], total = off[n] - base;
  const gk_i64 t0 = (gk_i64)blockIdx.x * TILE;
  const gk_i64 p = tile_first_list<SEARCH>(off, n, t0, P, sm.scan);
  const gk_i64 own = tile_owners<ITEMS>(off, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  gk_i64 v[ITEMS];
  gk_i64 lstart = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    if (h[j] >= 0) {
      lstart = pos;
    } else if (j == 0 && pos < total) {
      lstart = off[own] - base;
    }
    v[j] = pos - lstart;
  }
  store_run(out, pos0, total, v);
}

__device__ __forceinline__ void local_index_naive(const gk_i64* __restrict__ off, gk_i64 n,
                                                  gk_i64* __restrict__ out) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 o = off[i] - off[0], m = off[i + 1] - off[i];
  for (gk_i64 k = 0; k < m; ++k) out[o + k] = k;
}

// ---------------------------------------------------------------------------------------
// combinations and cartesian
__device__ __forceinline__ gk_i64 n_choose(gk_i64 m, gk_i64 k, gk_i64 replacement) {
  if (replacement) m += k - 1;
  if (m < k) return 0;
  return k == 2 ? m * (m - 1) / 2 : m * (m - 1) * (m - 2) / 6;
}

struct ChooseCount {  // C(length, k), with replacement C(length + k - 1, k)
  const gk_i64* __restrict__ starts;
  const gk_i64* __restrict__ stops;
  gk_i64 k, replacement;
  __device__ void operator()(gk_i64 i0, gk_i64 n, gk_i64 (&c)[LIST_ITEMS]) const {
    gk_i64 a[LIST_ITEMS], b[LIST_ITEMS];
    load_run(a, starts, i0, n);
    load_run(b, stops, i0, n);
#pragma unroll
    for (int j = 0; j < LIST_ITEMS; ++j) c[j] = n_choose(b[j] - a[j], k, replacement);
  }
};

struct ProductCount {  // length_a * length_b
  const gk_i64* __restrict__ starts_a;
  const gk_i64* __restrict__ stops_a;
  const gk_i64* __restrict__ starts_b;
  const gk_i64* __restrict__ stops_b;
  __device__ void operator()(gk_i64 i0, gk_i64 n, gk_i64 (&c)[LIST_ITEMS]) const {
    gk_i64 a[LIST_ITEMS], b[LIST_ITEMS], x[LIST_ITEMS], y[LIST_ITEMS];
    load_run(a, starts_a, i0, n);
    load_run(b, stops_a, i0, n);
    load_run(x, starts_b, i0, n);
    load_run(y, stops_b, i0, n);
#pragma unroll
    for (int j = 0; j < LIST_ITEMS; ++j) c[j] = (b[j] - a[j]) * (y[j] - x[j]);
  }
};

// pairs x < y among mm elements whose first element is below a
__device__ __forceinline__ gk_i64 pairs_before(gk_i64 a, gk_i64 mm) { return a * (2 * mm - a - 1) / 2; }
// triples x < y < z among mm elements whose first element is below a
__device__ __forceinline__ gk_i64 c3(gk_i64 y) { return y < 3 ? 0 : y * (y - 1) * (y - 2) / 6; }
__device__ __forceinline__ gk_i64 triples_before(gk_i64 a, gk_i64 mm) { return c3(mm) - c3(mm - a); }

// The r-th pair (a < b) among mm elements in lexicographic order (integer search, once
// per thread; the following tuples are stepped to).
__device__ __forceinline__ void unrank_pair(gk_i64 r, gk_i64 mm, gk_i64& a, gk_i64& b) {
  gk_i64 lo = 0, hi = mm - 2;  // largest x in [0, mm-2] with pairs_before(x) <= r
  while (lo < hi) {
    const gk_i64 mid = (lo + hi + 1) >> 1;
    if (pairs_before(mid, mm) <= r) lo = mid; else hi = mid - 1;
  }
  a = lo;
  b = lo + 1 + (r - pairs_before(lo, mm));
}

__device__ __forceinline__ void unrank_triple(gk_i64 r, gk_i64 mm, gk_i64& a, gk_i64& b, gk_i64& c) {
  gk_i64 lo = 0, hi = mm - 3;
  while (lo < hi) {
    const gk_i64 mid = (lo + hi + 1) >> 1;
    if (triples_before(mid, mm) <= r) lo = mid; else hi = mid - 1;
  }
  a = lo;
  gk_i64 x, y;
  unrank_pair(r - triples_before(lo, mm), mm - lo - 1, x, y);
  b = lo + 1 + x;
  c = lo + 1 + y;
}

// Output positions of the lists of ``off`` (the tuple offsets), flattened. K = 2 or 3.
template <bool SEARCH, int K>
__device__ __forceinline__ void combinations_tile(const gk_i64* __restrict__ starts,
                                                  const gk_i64* __restrict__ stops, gk_i64 repl,
                                                  gk_i64 local, const gk_i64* __restrict__ off,
                                                  gk_i64 n, const gk_i64* __restrict__ P,
                                                  gk_i64* __restrict__ o0, gk_i64* __restrict__ o1,
                                                  gk_i64* __restrict__ o2, owner_smem<ITEMS>& sm) {
  const gk_i64 total = off[n] - off[0];
  const gk_i64 t0 = (gk_i64)blockIdx.x * TILE;
  const gk_i64 p = tile_first_list<SEARCH>(off, n, t0, P, sm.scan);
  gk_i64 own = tile_owners<ITEMS>(off, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  const gk_i64 g = repl ? 0 : 1;  // gap between consecutive positions of a tuple
  gk_i64 v0[ITEMS], v1[ITEMS], v2[ITEMS];
  gk_i64 a = 0, b = 0, c = 0, m = 0, sb = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    const bool head = h[j] >= 0;
    if (head || (j == 0 && pos < total)) {
      if (head) own = p + h[j];
      const gk_i64 s = starts[own];
      m = stops[own] - s;
      sb = local ? 0 : s;
      if (head) {
        a = 0;
        b = g;
        c = 2 * g;
      } else {  // unrank in the strictly increasing space of m + (K - 1) (1 - g) elements
        const gk_i64 r = pos - (off[own] - off[0]);
        if (K == 2) {
          unrank_pair(r, m + (1 - g), a, b);
          b -= 1 - g;
        } else {
          unrank_triple(r, m + 2 * (1 - g), a, b, c);
          b -= 1 - g;
          c -= 2 * (1 - g);
        }
      }
    } else if (K == 2) {  // the next pair
      if (++b >= m) {
        ++a;
        b = a + g;
      }
    } else {  // the next triple
      if (++c >= m) {
        if (++b + g >= m) {
          ++a;
          b = a + g;
        }
        c = b + g;
      }
    }
    v0[j] = sb + a;
    v1[j] = sb + b;
    v2[j] = sb + c;
  }
  store_run(o0, pos0, total, v0);
  store_run(o1, pos0, total, v1);
  if (K == 3) store_run(o2, pos0, total, v2);
}

template <bool SEARCH>
__device__ __forceinline__ void combinations_flat(const gk_i64* starts, const gk_i64* stops,
                                                  gk_i64 k, gk_i64 repl, gk_i64 local,
                                                  const gk_i64* off, gk_i64 n, const gk_i64* P,
                                                  gk_i64* o0, gk_i64* o1, gk_i64* o2) {
  __shared__ owner_smem<ITEMS> sm;
  if (k == 2) {
    combinations_tile<SEARCH, 2>(starts, stops, repl, local, off, n, P, o0, o1, o2, sm);
  } else {
    combinations_tile<SEARCH, 3>(starts, stops, repl, local, off, n, P, o0, o1, o2, sm);
  }
}

__device__ __forceinline__ void combinations_naive(const gk_i64* __restrict__ starts,
                                                   const gk_i64* __restrict__ stops, gk_i64 k,
                                                   gk_i64 repl, gk_i64 local,
                                                   const gk_i64* __restrict__ off, gk_i64 n,
                                                   gk_i64* __restrict__ o0, gk_i64* __restrict__ o1,
                                                   gk_i64* __restrict__ o2) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 s = starts[i], m = stops[i] - s, sb = local ? 0 : s, g = repl ? 0 : 1;
  gk_i64 w = off[i];
  for (gk_i64 a = 0; a < m; ++a) {
    for (gk_i64 b = a + g; b < m; ++b) {
      if (k == 2) {
        o0[w] = sb + a;
        o1[w] = sb + b;
        ++w;
        continue;
      }
      for (gk_i64 c = b + g; c < m; ++c) {
        o0[w] = sb + a;
        o1[w] = sb + b;
        o2[w] = sb + c;
        ++w;
      }
    }
  }
}

template <bool SEARCH>
__device__ __forceinline__ void cartesian_flat(const gk_i64* __restrict__ starts_a,
                                               const gk_i64* __restrict__ stops_a,
                                               const gk_i64* __restrict__ starts_b,
                                               const gk_i64* __restrict__ stops_b, gk_i64 local,
                                               const gk_i64* __restrict__ off, gk_i64 n,
                                               const gk_i64* __restrict__ P,
                                               gk_i64* __restrict__ oa, gk_i64* __restrict__ ob) {
  __shared__ owner_smem<ITEMS> sm;
  const gk_i64 total = off[n] - off[0];
  const gk_i64 t0 = (gk_i64)blockIdx.x * TILE;
  const gk_i64 p = tile_first_list<SEARCH>(off, n, t0, P, sm.scan);
  gk_i64 own = tile_owners<ITEMS>(off, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  gk_i64 va[ITEMS], vb[ITEMS];
  gk_i64 a = 0, b = 0, mb = 1, ba = 0, bb = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    const bool head = h[j] >= 0;
    if (head || (j == 0 && pos < total)) {
      if (head) own = p + h[j];
      const gk_i64 sa = starts_a[own], sb = starts_b[own];
      mb = stops_b[own] - sb;
      ba = local ? 0 : sa;
      bb = local ? 0 : sb;
      const gk_i64 r = head ? 0 : pos - (off[own] - off[0]);
      a = r / mb;
      b = r - a * mb;
    } else if (++b >= mb) {
      b = 0;
      ++a;
    }
    va[j] = ba + a;
    vb[j] = bb + b;
  }
  store_run(oa, pos0, total, va);
  store_run(ob, pos0, total, vb);
}

__device__ __forceinline__ void cartesian_naive(const gk_i64* __restrict__ starts_a,
                                                const gk_i64* __restrict__ stops_a,
                                                const gk_i64* __restrict__ starts_b,
                                                const gk_i64* __restrict__ stops_b, gk_i64 local,
                                                const gk_i64* __restrict__ off, gk_i64 n,
                                                gk_i64* __restrict__ oa, gk_i64* __restrict__ ob) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 sa = starts_a[i], sb = starts_b[i];
  const gk_i64 ma = stops_a[i] - sa, mb = stops_b[i] - sb;
  const gk_i64 ba = local ? 0 : sa, bb = local ? 0 : sb;
  gk_i64 w = off[i];
  for (gk_i64 a = 0; a < ma; ++a)
    for (gk_i64 b = 0; b < mb; ++b) {
      oa[w] = ba + a;
      ob[w] = bb + b;
      ++w;
    }
}

// ---------------------------------------------------------------------------------------
// sorting: keys
template <bool C, class A, class B> struct pick { typedef A type; };
template <class A, class B> struct pick<false, A, B> { typedef B type; };

enum : int { KIND_SIGNED = 0, KIND_UNSIGNED = 1, KIND_FLOAT = 2 };

// T: the raw element (unsigned of the element's width); K: its key
template <class T> struct sort_key {
  typedef typename pick<sizeof(T) == 8, gk_u64, unsigned>::type K;
  static constexpr K KMAX = ~K(0);
};

// The key of a raw element: unsigned integers whose order is the sort order (descending:
// complemented), NaN = 0 (first in both directions), -0.0 and 0.0 equal.
template <class T>
__device__ __forceinline__ typename sort_key<T>::K make_key(T raw, int kind, int desc) {
  typedef typename sort_key<T>::K K;
  K k;
  if (kind == KIND_FLOAT && sizeof(T) == 8) {
    gk_u64 bits = (gk_u64)raw;
    if ((bits & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) return 0;
    if ((bits << 1) == 0) bits = 0;
    k = (K)((bits >> 63) ? ~bits : bits | 0x8000000000000000ull);
  } else if (kind == KIND_FLOAT && sizeof(T) == 4) {
    unsigned bits = (unsigned)raw;
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0;
    if ((bits << 1) == 0) bits = 0;
    k = (K)((bits >> 31) ? ~bits : bits | 0x80000000u);
  } else if (kind == KIND_SIGNED) {
    K sx;
    if (sizeof(T) == 1) sx = (K)(int)(signed char)raw;
    else if (sizeof(T) == 2) sx = (K)(int)(short)raw;
    else sx = (K)raw;
    k = sx ^ (K(1) << (8 * sizeof(K) - 1));
  } else {
    k = (K)raw;
  }
  return desc ? (K)~k : k;
}

template <class K>
__device__ __forceinline__ bool before(K ka, unsigned ia, K kb, unsigned ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// What a sort writes at one output slot: the position (argsort) or the value (sort).
template <class T, bool VALUES>
struct sort_out {
  typedef typename pick<VALUES, T, gk_i64>::type type;
  __device__ static type of(const T* values, gk_i64 s, gk_i64 idx) {
    if constexpr (VALUES) return values[s + idx];
    else return idx;
  }
};

// ---------------------------------------------------------------------------------------
// classify: medium lists at the front of ``ids``, large ones at the back; stats = [number
// medium, number large, longest large list, elements in large lists] (zeroed by the host)
__device__ __forceinline__ void classify_body(const gk_i64* __restrict__ off, gk_i64 n,
                                              gk_i64* stats, gk_i64* __restrict__ ids) {
  __shared__ scan_smem s;
  __shared__ gk_i64 bases[2];
  const gk_i64 i = global_thread();
  const gk_i64 m = i < n ? off[i + 1] - off[i] : 0;
  const bool medium = m > RANK_MAX && m <= BITONIC_MAX, large = m > BITONIC_MAX;
  const gk_i64 packed = (medium ? 1 : 0) | ((large ? 1ll : 0ll) << 32);
  gk_i64 total;
  const gk_i64 excl = block_excl_sum(packed, s, total);
  if (threadIdx.x == 0) {
    const gk_i64 tm = total & 0xFFFFFFFFll, tl = total >> 32;
    bases[0] = tm ? (gk_i64)atomicAdd((unsigned long long*)stats, (unsigned long long)tm) : 0;
    bases[1] = tl ? (gk_i64)atomicAdd((unsigned long long*)(stats + 1), (unsigned long long)tl) : 0;
  }
  __syncthreads();
  if (medium) ids[bases[0] + (excl & 0xFFFFFFFFll)] = i;
  if (large) {
    ids[n - 1 - (bases[1] + (excl >> 32))] = i;
    atomicMax((unsigned long long*)(stats + 2), (unsigned long long)m);
    atomicAdd((unsigned long long*)(stats + 3), (unsigned long long)m);
  }
}

// small lists: one thread per element counts the elements that go before it
template <class T, bool VALUES, bool SEARCH>
__device__ __forceinline__ void rank_tile(const gk_i64* __restrict__ off, gk_i64 n,
                                          const T* __restrict__ values, int kind, int desc,
                                          const gk_i64* __restrict__ P, gk_i64 tile,
                                          typename sort_out<T, VALUES>::type* __restrict__ out,
                                          owner_smem<ITEMS>& sm) {
  typedef typename sort_key<T>::K K;
  const gk_i64 base = off[0], total = off[n] - base;
  const gk_i64 t0 = tile * TILE;
  const gk_i64 p = tile_first_list<SEARCH>(off, n, t0, P, sm.scan);
  gk_i64 own = tile_owners<ITEMS>(off, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  T v[ITEMS];
  load_run(v, values + base, pos0, total);
  gk_i64 s = 0, m = 0;  // current list: absolute start, length
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    if (h[j] >= 0 || (j == 0 && pos < total)) {
      if (h[j] >= 0) own = p + h[j];
      s = off[own];
      m = off[own + 1] - s;
    }
    if (pos >= total || m > RANK_MAX) continue;
    const unsigned me = (unsigned)(base + pos - s);
    const K kme = make_key<T>(v[j], kind, desc);
    int rank = 0;
    for (int q = 0; q < (int)m; ++q)
      rank += before(make_key<T>(values[s + q], kind, desc), (unsigned)q, kme, me) ? 1 : 0;
    if constexpr (VALUES) out[s - base + rank] = v[j];
    else out[s - base + rank] = (gk_i64)me;
  }
}

template <class K>
struct bitonic_smem {
  K key[BITONIC_MAX];
  unsigned idx[BITONIC_MAX];
};

// Sorts elements [s, s + m) (m <= BITONIC_MAX) of ``values`` in shared memory; in-list
// positions are ``lo`` + their place in the run. The block's threads all call it.
template <class T>
__device__ __forceinline__ int bitonic_run(const T* __restrict__ values, gk_i64 s, gk_i64 m,
                                           unsigned lo, int kind, int desc,
                                           bitonic_smem<typename sort_key<T>::K>& sm) {
  typedef typename sort_key<T>::K K;
  int P = 1;
  while (P < m) P <<= 1;
  for (int t = threadIdx.x; t < P; t += GK_BLOCK) {
    const bool real = t < m;
    sm.key[t] = real ? make_key<T>(values[s + t], kind, desc) : sort_key<T>::KMAX;
    sm.idx[t] = real ? lo + (unsigned)t : 0xFFFFFFFFu;
  }
  __syncthreads();
  for (int k = 2; k <= P; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < (P >> 1); t += GK_BLOCK) {
        const int i = 2 * j * (t / j) + (t % j), l = i + j;
        const bool up = (i & k) == 0;
        const K ki = sm.key[i], kl = sm.key[l];
        const unsigned xi = sm.idx[i], xl = sm.idx[l];
        if (before(kl, xl, ki, xi) == up) {
          sm.key[i] = kl;
          sm.key[l] = ki;
          sm.idx[i] = xl;
          sm.idx[l] = xi;
        }
      }
      __syncthreads();
    }
  }
  return P;
}

// medium list ids[b]: sorted in shared memory, written to its output slots
template <class T, bool VALUES>
__device__ __forceinline__ void bitonic_list(const gk_i64* __restrict__ off, const T* __restrict__ values,
                                             int kind, int desc, gk_i64 i,
                                             typename sort_out<T, VALUES>::type* __restrict__ out,
                                             bitonic_smem<typename sort_key<T>::K>& sm) {
  const gk_i64 s = off[i], m = off[i + 1] - s, o = s - off[0];
  bitonic_run<T>(values, s, m, 0u, kind, desc, sm);
  for (int t = threadIdx.x; t < m; t += GK_BLOCK) out[o + t] = sort_out<T, VALUES>::of(values, s, sm.idx[t]);
}

// large lists: chunk b of list ``slot`` sorted into the scratch runs (key, position)
template <class T>
__device__ __forceinline__ void sort_chunks_body(const gk_i64* __restrict__ chunk_slot,
                                                 const gk_i64* __restrict__ chunk_lo,
                                                 const gk_i64* __restrict__ lstart,
                                                 const gk_i64* __restrict__ llen,
                                                 const gk_i64* __restrict__ ltmp,
                                                 const T* __restrict__ values, int kind, int desc,
                                                 typename sort_key<T>::K* __restrict__ tkey,
                                                 unsigned* __restrict__ tidx) {
  typedef typename sort_key<T>::K K;
  __shared__ bitonic_smem<K> sm;
  const gk_i64 slot = chunk_slot[blockIdx.x], lo = chunk_lo[blockIdx.x];
  const gk_i64 len = llen[slot];
  const gk_i64 cm = len - lo < BITONIC_MAX ? len - lo : BITONIC_MAX;
  bitonic_run<T>(values, lstart[slot] + lo, cm, (unsigned)lo, kind, desc, sm);
  const gk_i64 t0 = ltmp[slot] + lo;
  for (int t = threadIdx.x; t < cm; t += GK_BLOCK) {
    tkey[t0 + t] = sm.key[t];
    tidx[t0 + t] = sm.idx[t];
  }
}

// One merge-path pass over the large lists: runs of ``width`` are merged pairwise; the
// last pass writes the outputs. Block b merges tile tile_d0[b] of list tile_slot[b].
template <class T, bool VALUES>
__device__ __forceinline__ void merge_body(const gk_i64* __restrict__ tile_slot,
                                           const gk_i64* __restrict__ tile_d0,
                                           const gk_i64* __restrict__ lstart,
                                           const gk_i64* __restrict__ llen,
                                           const gk_i64* __restrict__ ltmp,
                                           const gk_i64* __restrict__ lout, gk_i64 width,
                                           const typename sort_key<T>::K* __restrict__ skey,
                                           const unsigned* __restrict__ sidx,
                                           typename sort_key<T>::K* __restrict__ dkey,
                                           unsigned* __restrict__ didx, gk_i64 final_pass,
                                           const T* __restrict__ values,
                                           typename sort_out<T, VALUES>::type* __restrict__ out) {
  typedef typename sort_key<T>::K K;
  const gk_i64 slot = tile_slot[blockIdx.x];
  const gk_i64 m = llen[slot];
  const gk_i64 d0 = tile_d0[blockIdx.x] + (gk_i64)threadIdx.x * MERGE_ITEMS;
  if (d0 >= m) return;
  const gk_i64 tb = ltmp[slot];
  const gk_i64 a0 = (d0 / (2 * width)) * (2 * width);
  const gk_i64 la = m - a0 < width ? m - a0 : width;
  const gk_i64 rest = m - a0 - la;
  const gk_i64 lb = rest < width ? rest : width;
  const K* ak = skey + tb + a0;
  const unsigned* ax = sidx + tb + a0;
  const K* bk = ak + la;
  const unsigned* bx = ax + la;
  const gk_i64 diag = d0 - a0;
  gk_i64 lo = diag - lb > 0 ? diag - lb : 0;
  gk_i64 hi = diag < la ? diag : la;
  while (lo < hi) {  // how many of the first ``diag`` merged come from A
    const gk_i64 mid = (lo + hi) >> 1;
    if (before(ak[mid], ax[mid], bk[diag - 1 - mid], bx[diag - 1 - mid])) lo = mid + 1;
    else hi = mid;
  }
  gk_i64 ia = lo, ib = diag - lo;
  const gk_i64 end = a0 + la + lb;
  for (int q = 0; q < MERGE_ITEMS; ++q) {
    const gk_i64 d = d0 + q;
    if (d >= end) break;
    const bool take_a = ib >= lb || (ia < la && before(ak[ia], ax[ia], bk[ib], bx[ib]));
    const K key = take_a ? ak[ia] : bk[ib];
    const unsigned idx = take_a ? ax[ia] : bx[ib];
    if (take_a) ++ia; else ++ib;
    if (final_pass) {
      out[lout[slot] + d] = sort_out<T, VALUES>::of(values, lstart[slot], idx);
    } else {
      dkey[tb + d] = key;
      didx[tb + d] = idx;
    }
  }
}

// naive: one thread per list, bottom-up merge sort of (key, position) through global memory
template <class T, bool VALUES>
__device__ __forceinline__ void sort_naive_body(const gk_i64* __restrict__ off, gk_i64 n,
                                                const T* __restrict__ values, int kind, int desc,
                                                typename sort_key<T>::K* k0, unsigned* x0,
                                                typename sort_key<T>::K* k1, unsigned* x1,
                                                typename sort_out<T, VALUES>::type* __restrict__ out) {
  typedef typename sort_key<T>::K K;
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 s = off[i], m = off[i + 1] - s, o = s - off[0];
  K* sk = k0 + o;
  unsigned* sx = x0 + o;
  K* dk = k1 + o;
  unsigned* dx = x1 + o;
  for (gk_i64 t = 0; t < m; ++t) {
    sk[t] = make_key<T>(values[s + t], kind, desc);
    sx[t] = (unsigned)t;
  }
  for (gk_i64 w = 1; w < m; w <<= 1) {
    for (gk_i64 lo = 0; lo < m; lo += 2 * w) {
      const gk_i64 mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
      gk_i64 a = lo, b = mid, d = lo;
      while (a < mid && b < hi) {
        if (before(sk[b], sx[b], sk[a], sx[a])) {
          dk[d] = sk[b];
          dx[d++] = sx[b++];
        } else {
          dk[d] = sk[a];
          dx[d++] = sx[a++];
        }
      }
      while (a < mid) {
        dk[d] = sk[a];
        dx[d++] = sx[a++];
      }
      while (b < hi) {
        dk[d] = sk[b];
        dx[d++] = sx[b++];
      }
    }
    K* tk = sk; sk = dk; dk = tk;
    unsigned* tx = sx; sx = dx; dx = tx;
  }
  for (gk_i64 t = 0; t < m; ++t) out[o + t] = sort_out<T, VALUES>::of(values, s, sx[t]);
}

template <class T>
union sort_smem {
  owner_smem<ITEMS> rank;
  bitonic_smem<typename sort_key<T>::K> bitonic;
};

}  // namespace gks

// ---------------------------------------------------------------------------------------
// extern "C" entry points. Scalars are int64 (the launcher passes every scalar as one).
#if !defined(GK_VARIANT_SPLIT) && !defined(GK_VARIANT_FUSED) && !defined(GK_VARIANT_NAIVE)
#error "define one of GK_VARIANT_SPLIT, GK_VARIANT_FUSED, GK_VARIANT_NAIVE"
#endif

#define GK_PARTITION                                                                       \
  extern "C" __global__ void GK_LB gk_partition(const gk_i64* off, gk_i64 n, gk_i64 tile,    \
                                               gk_i64 ntiles, gk_i64* P) {                 \
    gkf::partition_body(off, n, tile, ntiles, P);                                          \
  }
#define GK_SCAN_TILES                                                                      \
  extern "C" __global__ void GK_LB gk_scan_tiles(gk_i64* sums, gk_i64 ntiles) {            \
    gkf::scan_tiles_body(sums, ntiles);                                                    \
  }
#if defined(GK_VARIANT_SPLIT)
#define GK_VSUFFIX split
#define GK_VSEARCH false
#elif defined(GK_VARIANT_FUSED)
#define GK_VSUFFIX fused
#define GK_VSEARCH true
#else
#define GK_VSUFFIX naive
#define GK_VSEARCH false
#endif
#define GK_CAT2(a, b) a##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define GK_VNAME(prefix) GK_CAT(prefix, GK_VSUFFIX)

#if defined(GK_FAMILY_LOCAL_INDEX)
// one thread per list: the naive strategy, and every strategy's choice for lists of about
// one element (launchers.py)
extern "C" __global__ void GK_LB gk_local_index_perlist(const gk_i64* off, gk_i64 n, const gk_i64* P,
                                                        gk_i64* out) {
  gks::local_index_naive(off, n, out);
}
#if defined(GK_VARIANT_SPLIT)
GK_PARTITION
#endif
#if !defined(GK_VARIANT_NAIVE)
extern "C" __global__ void GK_LB GK_VNAME(gk_local_index_)(const gk_i64* off, gk_i64 n,
                                                           const gk_i64* P, gk_i64* out) {
  gks::local_index_flat<GK_VSEARCH>(off, n, P, out);
}
#endif
#endif  // GK_FAMILY_LOCAL_INDEX

#if defined(GK_FAMILY_COMBINATIONS)
#if defined(GK_VARIANT_FUSED)
extern "C" __global__ void GK_LB gk_choose_fused(const gk_i64* starts, const gk_i64* stops, gk_i64 k,
                                                 gk_i64 repl, gk_i64 n, gk_u64* status, gk_i64* out) {
  gkf::list_fused_body(gks::ChooseCount{starts, stops, k, repl}, n, status, out);
}
extern "C" __global__ void GK_LB gk_product_fused(const gk_i64* sa, const gk_i64* ta, const gk_i64* sb,
                                                  const gk_i64* tb, gk_i64 n, gk_u64* status,
                                                  gk_i64* out) {
  gkf::list_fused_body(gks::ProductCount{sa, ta, sb, tb}, n, status, out);
}
#else
GK_SCAN_TILES
extern "C" __global__ void GK_LB gk_choose_tiles(const gk_i64* starts, const gk_i64* stops, gk_i64 k,
                                                 gk_i64 repl, gk_i64 n, gk_i64* sums) {
  gkf::list_tiles_body(gks::ChooseCount{starts, stops, k, repl}, n, sums);
}
extern "C" __global__ void GK_LB gk_choose_down(const gk_i64* starts, const gk_i64* stops, gk_i64 k,
                                                gk_i64 repl, gk_i64 n, const gk_i64* sums,
                                                gk_i64* out) {
  gkf::list_down_body(gks::ChooseCount{starts, stops, k, repl}, n, sums, out);
}
extern "C" __global__ void GK_LB gk_product_tiles(const gk_i64* sa, const gk_i64* ta, const gk_i64* sb,
                                                  const gk_i64* tb, gk_i64 n, gk_i64* sums) {
  gkf::list_tiles_body(gks::ProductCount{sa, ta, sb, tb}, n, sums);
}
extern "C" __global__ void GK_LB gk_product_down(const gk_i64* sa, const gk_i64* ta, const gk_i64* sb,
                                                 const gk_i64* tb, gk_i64 n, const gk_i64* sums,
                                                 gk_i64* out) {
  gkf::list_down_body(gks::ProductCount{sa, ta, sb, tb}, n, sums, out);
}
#endif
#if defined(GK_VARIANT_SPLIT)
GK_PARTITION
#endif
extern "C" __global__ void GK_LB GK_VNAME(gk_combinations_)(
    const gk_i64* starts, const gk_i64* stops, gk_i64 k, gk_i64 repl, gk_i64 local,
    const gk_i64* off, gk_i64 n, const gk_i64* P, gk_i64* o0, gk_i64* o1, gk_i64* o2) {
#if defined(GK_VARIANT_NAIVE)
  gks::combinations_naive(starts, stops, k, repl, local, off, n, o0, o1, o2);
#else
  gks::combinations_flat<GK_VSEARCH>(starts, stops, k, repl, local, off, n, P, o0, o1, o2);
#endif
}
extern "C" __global__ void GK_LB GK_VNAME(gk_cartesian_)(
    const gk_i64* sa, const gk_i64* ta, const gk_i64* sb, const gk_i64* tb, gk_i64 local,
    const gk_i64* off, gk_i64 n, const gk_i64* P, gk_i64* oa, gk_i64* ob) {
#if defined(GK_VARIANT_NAIVE)
  gks::cartesian_naive(sa, ta, sb, tb, local, off, n, oa, ob);
#else
  gks::cartesian_flat<GK_VSEARCH>(sa, ta, sb, tb, local, off, n, P, oa, ob);
#endif
}
#endif  // GK_FAMILY_COMBINATIONS

#if defined(GK_FAMILY_SORT)
#define GK_SORT_WIDTHS(X) \
  X(b8, unsigned char) X(b16, unsigned short) X(b32, unsigned) X(b64, unsigned long long)
#define GK_OUT(T, V) gks::sort_out<T, V>::type
#define GK_KEY(T) gks::sort_key<T>::K

#if defined(GK_VARIANT_NAIVE)
#define GK_SORT_KERNELS(W, T)                                                                       \
  GK_SORT_NAIVE(W, T, argsort, false) GK_SORT_NAIVE(W, T, sort, true)
#define GK_SORT_NAIVE(W, T, NAME, V)                                                                \
  extern "C" __global__ void GK_LB gk_##NAME##_naive_##W(                                           \
      const gk_i64* off, gk_i64 n, const T* values, gk_i64 kind, gk_i64 desc, GK_KEY(T)* k0,        \
      unsigned* x0, GK_KEY(T)* k1, unsigned* x1, GK_OUT(T, V)* out) {                               \
    gks::sort_naive_body<T, V>(off, n, values, (int)kind, (int)desc, k0, x0, k1, x1, out);          \
  }
#else
extern "C" __global__ void GK_LB gk_sort_classify(const gk_i64* off, gk_i64 n, gk_i64* stats,
                                                  gk_i64* ids) {
  gks::classify_body(off, n, stats, ids);
}
#define GK_SORT_LARGE(W, T, NAME, V)                                                                \
  extern "C" __global__ void GK_LB gk_##NAME##_merge_##W(                                           \
      const gk_i64* tile_slot, const gk_i64* tile_d0, const gk_i64* lstart, const gk_i64* llen,     \
      const gk_i64* ltmp, const gk_i64* lout, gk_i64 width, const GK_KEY(T)* skey,                  \
      const unsigned* sidx, GK_KEY(T)* dkey, unsigned* didx, gk_i64 final_pass, const T* values,    \
      GK_OUT(T, V)* out) {                                                                          \
    gks::merge_body<T, V>(tile_slot, tile_d0, lstart, llen, ltmp, lout, width, skey, sidx, dkey,    \
                          didx, final_pass, values, out);                                           \
  }
#define GK_SORT_CHUNKS(W, T)                                                                        \
  extern "C" __global__ void GK_LB gk_sort_chunks_##W(                                              \
      const gk_i64* chunk_slot, const gk_i64* chunk_lo, const gk_i64* lstart, const gk_i64* llen,   \
      const gk_i64* ltmp, const T* values, gk_i64 kind, gk_i64 desc, GK_KEY(T)* tkey,               \
      unsigned* tidx) {                                                                             \
    gks::sort_chunks_body<T>(chunk_slot, chunk_lo, lstart, llen, ltmp, values, (int)kind,           \
                             (int)desc, tkey, tidx);                                                \
  }
#if defined(GK_VARIANT_SPLIT)
GK_PARTITION
#define GK_SORT_SMALL(W, T, NAME, V)                                                                \
  extern "C" __global__ void GK_LB gk_##NAME##_rank_##W(                                            \
      const gk_i64* off, gk_i64 n, const T* values, gk_i64 kind, gk_i64 desc, const gk_i64* P,      \
      GK_OUT(T, V)* out) {                                                                          \
    __shared__ gkf::owner_smem<gks::ITEMS> sm;                                                      \
    gks::rank_tile<T, V, false>(off, n, values, (int)kind, (int)desc, P, blockIdx.x, out, sm);      \
  }                                                                                                 \
  extern "C" __global__ void GK_LB gk_##NAME##_block_##W(                                           \
      const gk_i64* off, gk_i64 n, const T* values, gk_i64 kind, gk_i64 desc, const gk_i64* ids,    \
      GK_OUT(T, V)* out) {                                                                          \
    __shared__ gks::bitonic_smem<GK_KEY(T)> sm;                                                     \
    gks::bitonic_list<T, V>(off, values, (int)kind, (int)desc, ids[blockIdx.x], out, sm);           \
  }
#else
#define GK_SORT_SMALL(W, T, NAME, V)                                                                \
  extern "C" __global__ void GK_LB gk_##NAME##_fused_##W(                                           \
      const gk_i64* off, gk_i64 n, const T* values, gk_i64 kind, gk_i64 desc, const gk_i64* ids,    \
      gk_i64 ntiles, GK_OUT(T, V)* out) {                                                           \
    __shared__ gks::sort_smem<T> sm;                                                                \
    if ((gk_i64)blockIdx.x < ntiles) {                                                              \
      gks::rank_tile<T, V, true>(off, n, values, (int)kind, (int)desc, nullptr, blockIdx.x, out,    \
                                 sm.rank);                                                          \
    } else {                                                                                        \
      gks::bitonic_list<T, V>(off, values, (int)kind, (int)desc, ids[blockIdx.x - ntiles], out,     \
                              sm.bitonic);                                                          \
    }                                                                                               \
  }
#endif
#define GK_SORT_KERNELS(W, T)                                                                       \
  GK_SORT_SMALL(W, T, argsort, false) GK_SORT_SMALL(W, T, sort, true)                              \
  GK_SORT_LARGE(W, T, argsort, false) GK_SORT_LARGE(W, T, sort, true) GK_SORT_CHUNKS(W, T)
#endif
GK_SORT_WIDTHS(GK_SORT_KERNELS)
#endif  // GK_FAMILY_SORT
