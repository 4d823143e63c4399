// Flattened-mapping machinery shared by the indexing (indexing.cu) and structure
// (structure.cu) kernel families: block scans built from warpSize-generic shuffles, the
// searches that map a tile of flat positions to its lists, a single-pass scan with
// decoupled look-back, and 128-bit loads with a scalar fallback for unaligned views.
//
// "Flattened": threads walk the flat positions (content, index or output positions), not
// one list each. A tile of GK_BLOCK * ITEMS consecutive positions goes to one block; each
// thread takes ITEMS consecutive positions (vector loads and stores). The lists that start
// inside a tile are found from the tile's first list ``p`` (a partition pass in the split
// strategy, a wave-cooperative search in the fused one); every non-empty list marks its
// first position in shared memory and an exclusive max-scan over the threads hands each
// thread the list that is open at its first position. Lists of any length cost the same
// per position, so one thread per list's divergence and imbalance never arise.
#pragma once

#include "portability.cuh"

namespace gkf {

static constexpr gk_u64 kFlagAggregate = 1ull << 62;  // look-back status: tile total known
static constexpr gk_u64 kFlagInclusive = 2ull << 62;  // look-back status: prefix through tile
static constexpr gk_u64 kValueMask = (1ull << 62) - 1;

// four ints read from shared memory in one 128-bit access (no vendor vector type needed)
struct alignas(16) int4v { int x, y, z, w; };

// ---------------------------------------------------------------------------------------
// wave and block scans (all lanes / threads must call them)
template <class V>
__device__ __forceinline__ V wave_incl_sum(V v) {
  const int lane = gk_lane();
  for (int d = 1; d < warpSize; d <<= 1) {
    const V u = gk_shfl_up(v, d);
    if (lane >= d) v += u;
  }
  return v;
}

template <class V>
__device__ __forceinline__ V wave_incl_max(V v) {
  const int lane = gk_lane();
  for (int d = 1; d < warpSize; d <<= 1) {
    const V u = gk_shfl_up(v, d);
    if (lane >= d && u > v) v = u;
  }
  return v;
}

// Sum over the wave, returned to every lane.
template <class V>
__device__ __forceinline__ V wave_sum(V v) {
  return gk_shfl(wave_incl_sum(v), warpSize - 1);
}

struct scan_smem {
  gk_i64 wave[GK_MAX_WAVES];
  gk_i64 total;
  gk_i64 bcast;
  gk_i64 bcast2;
};

// Exclusive sum over the threads of the block, in thread order; ``total`` = block sum.
__device__ __forceinline__ gk_i64 block_excl_sum(gk_i64 v, scan_smem& s, gk_i64& total) {
  const int lane = gk_lane(), wave = gk_wave();
  const int nw = GK_BLOCK / warpSize;
  const gk_i64 inc = wave_incl_sum(v);
  if (lane == warpSize - 1) s.wave[wave] = inc;
  __syncthreads();
  if (wave == 0) {
    const gk_i64 t = lane < nw ? s.wave[lane] : 0;
    const gk_i64 ti = wave_incl_sum(t);
    if (lane < nw) s.wave[lane] = ti - t;
    if (lane == warpSize - 1) s.total = ti;
  }
  __syncthreads();
  const gk_i64 r = s.wave[wave] + inc - v;
  total = s.total;
  __syncthreads();  // the scratch may be reused at once
  return r;
}

// Exclusive max over the threads of the block (values >= -1; -1 before the first thread).
__device__ __forceinline__ gk_i64 block_excl_max(gk_i64 v, scan_smem& s) {
  const int lane = gk_lane(), wave = gk_wave();
  const int nw = GK_BLOCK / warpSize;
  const gk_i64 inc = wave_incl_max(v);
  gk_i64 before = gk_shfl_up(inc, 1);
  if (lane == 0) before = -1;
  if (lane == warpSize - 1) s.wave[wave] = inc;
  __syncthreads();
  if (wave == 0) {
    const gk_i64 t = lane < nw ? s.wave[lane] : -1;
    const gk_i64 ti = wave_incl_max(t);
    gk_i64 e = gk_shfl_up(ti, 1);
    if (lane == 0) e = -1;
    if (lane < nw) s.wave[lane] = e;
  }
  __syncthreads();
  const gk_i64 w = s.wave[wave];
  __syncthreads();
  return w > before ? w : before;
}

// Whether ``pred`` holds in every thread of the block (a barrier; one ballot per wave and a
// shared-memory vote instead of __syncthreads_count, whose AMD device-library version is
// ISA-dependent).
__device__ __forceinline__ bool block_all(bool pred, scan_smem& s) {
  const int nw = GK_BLOCK / warpSize;
  const bool wave_all = gk_ballot(!pred) == 0;
  if (gk_lane() == 0) s.wave[gk_wave()] = wave_all ? 1 : 0;
  __syncthreads();
  bool all = true;
  for (int w = 0; w < nw; ++w) all = all && s.wave[w] != 0;
  __syncthreads();
  return all;
}

// ---------------------------------------------------------------------------------------
// searches over sorted int64 arrays (offsets)

// First i in [lo, hi) with a[i] >= x (hi if none); one thread.
__device__ __forceinline__ gk_i64 lower_bound(const gk_i64* __restrict__ a, gk_i64 lo, gk_i64 hi,
                                              gk_i64 x) {
  while (lo < hi) {
    const gk_i64 mid = lo + ((hi - lo) >> 1);
    if (a[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// The same, by a whole wave: each step probes one position per lane and narrows the
// range by the wave width (log_W instead of log_2 dependent loads). Result in all lanes.
__device__ __forceinline__ gk_i64 wave_lower_bound(const gk_i64* __restrict__ a, gk_i64 lo,
                                                   gk_i64 hi, gk_i64 x) {
  const gk_i64 W = warpSize;
  const gk_i64 lane = gk_lane();
  while (hi - lo > W) {
    const gk_i64 span = hi - lo;
    const gk_i64 q = lo + (span * (lane + 1)) / (W + 1);   // strictly increasing, in [lo, hi)
    const gk_i64 c = __popcll(gk_ballot(a[q] < x));          // probes below x: lanes [0, c)
    const gk_i64 new_lo = c > 0 ? lo + (span * c) / (W + 1) + 1 : lo;
    const gk_i64 new_hi = c < W ? lo + (span * (c + 1)) / (W + 1) : hi;
    lo = new_lo;
    hi = new_hi;
  }
  const gk_i64 q = lo + lane;
  const gk_i64 c = __popcll(gk_ballot(q < hi && a[q] < x));
  return lo + c;
}

// ---------------------------------------------------------------------------------------
// single-pass scan with decoupled look-back. ``status`` (zeroed before the launch) holds a
// ticket counter at [0] and one word per tile at [1 + k]: flag (2 bits) | value (62 bits),
// published with one 64-bit atomic so flag and value are always seen together. Tiles are
// numbered by ticket in the order blocks start, so every predecessor is running or done.

__device__ __forceinline__ gk_i64 take_ticket(gk_u64* status, scan_smem& s) {
  if (threadIdx.x == 0) s.bcast = (gk_i64)atomicAdd((unsigned long long*)status, 1ull);
  __syncthreads();
  const gk_i64 k = s.bcast;
  __syncthreads();
  return k;
}

__device__ __forceinline__ void publish(gk_u64* word, gk_u64 value) {
  atomicExch((unsigned long long*)word, (unsigned long long)value);
}

__device__ __forceinline__ gk_u64 observe(const gk_u64* word) {
  return *(const volatile gk_u64*)word;
}

// The exclusive prefix of tile k, by one whole wave (the result in every lane).
__device__ __forceinline__ gk_i64 look_back_wave(gk_u64* status, gk_i64 k, gk_i64 aggregate) {
  gk_u64* tiles = status + 1;
  const int lane = gk_lane();
  if (lane == 0)
    publish(tiles + k, (k == 0 ? kFlagInclusive : kFlagAggregate) | (gk_u64)aggregate);
  gk_i64 excl = 0;
  if (k > 0) {
    gk_i64 j = k - 1;  // lane l looks at tile j - l
    for (;;) {
      const gk_i64 t = j - lane;
      gk_u64 st = t >= 0 ? observe(tiles + t) : kFlagInclusive;
      while (gk_ballot((st >> 62) == 0) != 0) {
        if ((st >> 62) == 0) st = observe(tiles + t);
      }
      const gk_lanemask_t inclusive = gk_ballot((st >> 62) == 2);
      const int stop = inclusive ? __ffsll((long long)inclusive) - 1 : warpSize - 1;
      const gk_i64 v = lane <= stop ? (gk_i64)(st & kValueMask) : 0;
      excl += wave_sum(v);
      if (inclusive) break;
      j -= warpSize;
    }
    if (lane == 0) publish(tiles + k, kFlagInclusive | (gk_u64)(excl + aggregate));
  }
  return excl;
}

// The exclusive prefix of tile k (all threads call; the first wave looks back).
__device__ __forceinline__ gk_i64 look_back(gk_u64* status, gk_i64 k, gk_i64 aggregate,
                                            scan_smem& s) {
  if (gk_wave() == 0) {
    const gk_i64 excl = look_back_wave(status, k, aggregate);
    if (gk_lane() == 0) s.bcast = excl;
  }
  __syncthreads();
  const gk_i64 r = s.bcast;
  __syncthreads();
  return r;
}

// ---------------------------------------------------------------------------------------
// runs of N consecutive elements, loaded and stored with the widest vectors that divide
// them: 128-bit (GK_VEC_BYTES = 16) or 64-bit words, scalars for short runs. Vectors are
// used when the whole run is inside [0, limit) and its address is aligned (uniform across
// a launch for views that start on a vector boundary); otherwise element by element.
template <class V, class T>
union vec_view {
  V v;
  T e[sizeof(V) / sizeof(T)];
};

template <int BYTES>
struct run_vec {  // the vector type for a run of BYTES bytes
  static constexpr int width = BYTES % GK_VEC_BYTES == 0 ? GK_VEC_BYTES : (BYTES % 8 == 0 ? 8 : 0);
};
template <int W> struct vec_of;
template <> struct vec_of<16> { typedef gk_vec16 type; };
template <> struct vec_of<8> { typedef gk_vec8 type; };

// v[j] = p[pos0 + j] (0 where pos0 + j >= limit)
template <class T, int N>
__device__ __forceinline__ void load_run(T (&v)[N], const T* __restrict__ p, gk_i64 pos0,
                                         gk_i64 limit) {
  constexpr int W = run_vec<N * (int)sizeof(T)>::width;
  const T* src = p + pos0;
  if constexpr (W > 0) {
    typedef typename vec_of<W>::type V;
    constexpr int E = W / (int)sizeof(T);
    if (pos0 + N <= limit && ((unsigned long long)src % W) == 0) {
#pragma unroll
      for (int c = 0; c < N / E; ++c) {
        vec_view<V, T> u;
        u.v = reinterpret_cast<const V*>(src)[c];
#pragma unroll
        for (int e = 0; e < E; ++e) v[c * E + e] = u.e[e];
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = pos0 + j < limit ? src[j] : T(0);
}

// p[pos0 + j] = v[j] for pos0 + j < limit
template <class T, int N>
__device__ __forceinline__ void store_run(T* __restrict__ p, gk_i64 pos0, gk_i64 limit,
                                          const T (&v)[N]) {
  constexpr int W = run_vec<N * (int)sizeof(T)>::width;
  T* dst = p + pos0;
  if constexpr (W > 0) {
    typedef typename vec_of<W>::type V;
    constexpr int E = W / (int)sizeof(T);
    if (pos0 + N <= limit && ((unsigned long long)dst % W) == 0) {
#pragma unroll
      for (int c = 0; c < N / E; ++c) {
        vec_view<V, T> u;
#pragma unroll
        for (int e = 0; e < E; ++e) u.e[e] = v[c * E + e];
        reinterpret_cast<V*>(dst)[c] = u.v;
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (pos0 + j < limit) dst[j] = v[j];
}

// ---------------------------------------------------------------------------------------
// tiles of flat positions -> their lists

template <int ITEMS>
struct owner_smem {
  // per tile position: (list id - p) of the non-empty list starting there, else -1
  alignas(16) int head[GK_BLOCK * ITEMS];
  scan_smem scan;
};

// Where the lists of a tile begin: ``p`` = first list i (0 <= i <= n) with
// off[i] - base >= t0. Split strategy: a partition pass writes it per tile; fused: the
// block's first wave searches (a whole wave calls this).
__device__ __forceinline__ gk_i64 first_list_of_tile(const gk_i64* __restrict__ off, gk_i64 n,
                                                     gk_i64 t0) {
  return wave_lower_bound(off, 0, n + 1, off[0] + t0);
}

__device__ __forceinline__ gk_i64 searched_first_list(const gk_i64* __restrict__ off, gk_i64 n,
                                                      gk_i64 t0, scan_smem& s) {
  if (gk_wave() == 0) {
    const gk_i64 p = first_list_of_tile(off, n, t0);
    if (gk_lane() == 0) s.bcast = p;
  }
  __syncthreads();
  const gk_i64 p = s.bcast;
  __syncthreads();
  return p;
}

// The first list of tile t0: from the partition pass P (split) or searched (fused).
template <bool SEARCH>
__device__ __forceinline__ gk_i64 tile_first_list(const gk_i64* __restrict__ off, gk_i64 n,
                                                  gk_i64 t0, const gk_i64* __restrict__ P,
                                                  scan_smem& s) {
  if (SEARCH) return searched_first_list(off, n, t0, s);
  return P[blockIdx.x];
}

__device__ __forceinline__ gk_i64 global_thread() {
  return (gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x;
}

// look_back() and searched_first_list() at once: wave 0 looks back while wave 1 searches
// the offsets (one wave does both in turn on one-wave blocks), so the two chains of
// dependent loads overlap instead of adding up. Returns the prefix; ``first`` the list.
__device__ __forceinline__ gk_i64 look_back_and_first_list(gk_u64* status, gk_i64 k,
                                                           gk_i64 aggregate,
                                                           const gk_i64* __restrict__ off,
                                                           gk_i64 n, gk_i64 t0, scan_smem& s,
                                                           gk_i64& first) {
  const int wave = gk_wave();
  const bool one_wave = GK_BLOCK <= warpSize;
  if (wave == 0) {
    const gk_i64 excl = look_back_wave(status, k, aggregate);
    if (gk_lane() == 0) s.bcast = excl;
  }
  if (wave == (one_wave ? 0 : 1)) {
    const gk_i64 p = first_list_of_tile(off, n, t0);
    if (gk_lane() == 0) s.bcast2 = p;
  }
  __syncthreads();
  const gk_i64 r = s.bcast;
  first = s.bcast2;
  __syncthreads();
  return r;
}

// Marks the heads of the lists that start in tile [t0, t0 + TILE) (the last tile also
// takes the lists starting at ``total``), calls on_list(i, rel) for each of them (empty
// ones too; rel = start - t0), and returns the list open at this thread's first position
// (p - 1 when it began before the tile). Called by every thread of the block.
struct no_list_fn {
  __device__ void operator()(gk_i64, gk_i64) const {}
};

template <int ITEMS, class OnList>
__device__ __forceinline__ gk_i64 tile_owners(const gk_i64* __restrict__ off, gk_i64 n,
                                              gk_i64 t0, gk_i64 total, gk_i64 p,
                                              owner_smem<ITEMS>& sm, const OnList& on_list) {
  constexpr int TILE = GK_BLOCK * ITEMS;
  const int tid = threadIdx.x;
  const gk_i64 base = off[0];
  const gk_i64 t1 = t0 + TILE;
  const bool last = t1 >= total;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) sm.head[j * GK_BLOCK + tid] = -1;
  __syncthreads();
  for (gk_i64 q = p;; q += GK_BLOCK) {
    const gk_i64 i = q + tid;
    bool in = false;
    if (i < n) {
      const gk_i64 s = off[i] - base;
      in = last || s < t1;
      if (in) {
        const gk_i64 rel = s - t0;
        on_list(i, rel);
        if (rel < TILE && off[i + 1] - base > s) sm.head[rel] = (int)(i - p);
      }
    }
    // lists are ordered by start: once one is past the tile all later ones are
    if (!block_all(in, sm.scan)) break;
  }
  // the last head among this thread's positions, then the max over earlier threads
  int mine = -1;
  const int4v* row = reinterpret_cast<const int4v*>(sm.head + tid * ITEMS);
#pragma unroll
  for (int c = 0; c < ITEMS / 4; ++c) {
    const int4v h = row[c];
    mine = h.x >= 0 ? h.x : mine;
    mine = h.y >= 0 ? h.y : mine;
    mine = h.z >= 0 ? h.z : mine;
    mine = h.w >= 0 ? h.w : mine;
  }
  const gk_i64 before = block_excl_max((gk_i64)mine, sm.scan);
  return before >= 0 ? p + before : p - 1;
}

// The head marks of this thread's positions (after tile_owners).
template <int ITEMS>
__device__ __forceinline__ void thread_heads(const owner_smem<ITEMS>& sm, int (&h)[ITEMS]) {
  const int4v* row = reinterpret_cast<const int4v*>(sm.head + threadIdx.x * ITEMS);
#pragma unroll
  for (int c = 0; c < ITEMS / 4; ++c) {
    const int4v v = row[c];
    h[4 * c] = v.x;
    h[4 * c + 1] = v.y;
    h[4 * c + 2] = v.z;
    h[4 * c + 3] = v.w;
  }
}

// ---------------------------------------------------------------------------------------
// kernel bodies shared by several families

// split, pass 1: P[k] = first list of tile k, for k in [0, ntiles).
__device__ __forceinline__ void partition_body(const gk_i64* __restrict__ off, gk_i64 n,
                                               gk_i64 tile, gk_i64 ntiles, gk_i64* __restrict__ P) {
  const gk_i64 k = (gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x;
  if (k < ntiles) P[k] = lower_bound(off, 0, n + 1, off[0] + k * tile);
}

// Exclusive scan of sums[0, ntiles) in place by one block; sums[ntiles] = the total.
__device__ __forceinline__ void scan_tiles_body(gk_i64* __restrict__ sums, gk_i64 ntiles) {
  __shared__ scan_smem s;
  constexpr int SI = 4;
  gk_i64 carry = 0;
  for (gk_i64 b = 0; b < ntiles; b += (gk_i64)GK_BLOCK * SI) {
    const gk_i64 i0 = b + (gk_i64)threadIdx.x * SI;
    gk_i64 v[SI];
    gk_i64 t = 0;
#pragma unroll
    for (int j = 0; j < SI; ++j) {
      v[j] = i0 + j < ntiles ? sums[i0 + j] : 0;
      t += v[j];
    }
    gk_i64 total;
    gk_i64 e = carry + block_excl_sum(t, s, total);
#pragma unroll
    for (int j = 0; j < SI; ++j) {
      if (i0 + j < ntiles) sums[i0 + j] = e;
      e += v[j];
    }
    carry += total;
  }
  if (threadIdx.x == 0) sums[ntiles] = carry;
}

// ---------------------------------------------------------------------------------------
// scans over lists: offsets[o] = sum of count(i) for i < o, o in [0, n] (so offsets[0] = 0
// and offsets[n] = the total), for a count functor ``cnt(i0, n, c)`` that fills the counts
// of lists [i0, i0 + LIST_ITEMS) (0 past n). Each thread owns LIST_ITEMS consecutive
// outputs, so the stores of offsets are aligned vectors.
//   split: tiles pass (block sums) -> scan_tiles (one block) -> down pass (3 launches)
//   fused: one launch, decoupled look-back over a zeroed status buffer
enum : int { LIST_ITEMS = 4, LIST_TILE = GK_BLOCK * LIST_ITEMS };

struct LengthCount {  // stops[i] - starts[i]
  const gk_i64* __restrict__ starts;
  const gk_i64* __restrict__ stops;
  __device__ void operator()(gk_i64 i0, gk_i64 n, gk_i64 (&c)[LIST_ITEMS]) const {
    gk_i64 a[LIST_ITEMS], b[LIST_ITEMS];
    load_run(a, starts, i0, n);
    load_run(b, stops, i0, n);
#pragma unroll
    for (int j = 0; j < LIST_ITEMS; ++j) c[j] = b[j] - a[j];
  }
};

struct ArrayCount {  // counts[i]
  const gk_i64* __restrict__ counts;
  __device__ void operator()(gk_i64 i0, gk_i64 n, gk_i64 (&c)[LIST_ITEMS]) const {
    load_run(c, counts, i0, n);
  }
};

template <class Count>
__device__ __forceinline__ gk_i64 thread_counts(const Count& cnt, gk_i64 o0, gk_i64 n,
                                                gk_i64 (&c)[LIST_ITEMS]) {
  cnt(o0, n, c);
  gk_i64 t = 0;
#pragma unroll
  for (int j = 0; j < LIST_ITEMS; ++j) t += c[j];
  return t;
}

template <class Count>
__device__ __forceinline__ void list_tiles_body(const Count& cnt, gk_i64 n, gk_i64* __restrict__ sums) {
  __shared__ scan_smem s;
  const gk_i64 o0 = ((gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x) * LIST_ITEMS;
  gk_i64 c[LIST_ITEMS];
  const gk_i64 t = thread_counts(cnt, o0, n, c);
  gk_i64 total;
  block_excl_sum(t, s, total);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

template <class Count>
__device__ __forceinline__ void write_offsets(gk_i64* __restrict__ out, gk_i64 o0, gk_i64 n,
                                              gk_i64 e, const gk_i64 (&c)[LIST_ITEMS]) {
  gk_i64 v[LIST_ITEMS];
#pragma unroll
  for (int j = 0; j < LIST_ITEMS; ++j) {
    v[j] = e;
    e += c[j];
  }
  store_run(out, o0, n + 1, v);
}

template <class Count>
__device__ __forceinline__ void list_down_body(const Count& cnt, gk_i64 n,
                                               const gk_i64* __restrict__ sums,
                                               gk_i64* __restrict__ out) {
  __shared__ scan_smem s;
  const gk_i64 o0 = ((gk_i64)blockIdx.x * GK_BLOCK + threadIdx.x) * LIST_ITEMS;
  gk_i64 c[LIST_ITEMS];
  const gk_i64 t = thread_counts(cnt, o0, n, c);
  gk_i64 total;
  const gk_i64 e = sums[blockIdx.x] + block_excl_sum(t, s, total);
  write_offsets<Count>(out, o0, n, e, c);
}

template <class Count>
__device__ __forceinline__ void list_fused_body(const Count& cnt, gk_i64 n, gk_u64* status,
                                                gk_i64* __restrict__ out) {
  __shared__ scan_smem s;
  const gk_i64 k = take_ticket(status, s);
  const gk_i64 o0 = (k * GK_BLOCK + threadIdx.x) * LIST_ITEMS;
  gk_i64 c[LIST_ITEMS];
  const gk_i64 t = thread_counts(cnt, o0, n, c);
  gk_i64 total;
  const gk_i64 excl = block_excl_sum(t, s, total);
  const gk_i64 prefix = look_back(status, k, total, s);
  write_offsets<Count>(out, o0, n, prefix + excl, c);
}

// Adds the block total of ``v`` to *counter (one atomic per block; all threads call).
__device__ __forceinline__ void block_count_into(gk_i64 v, gk_i64* counter, scan_smem& s) {
  gk_i64 total;
  block_excl_sum(v, s, total);
  if (threadIdx.x == 0 && total != 0) atomicAdd((unsigned long long*)counter, (unsigned long long)total);
}

// Raises *largest to the block maximum of ``v`` (v >= 0; all threads call). Non-negative
// int64 order equals their unsigned order, so the 64-bit unsigned atomicMax of both
// vendors serves. *largest only grows, so a block whose maximum does not exceed a value
// read from it skips its atomic: thousands of blocks on one address would queue there.
__device__ __forceinline__ void block_max_into(gk_i64 v, gk_i64* largest, scan_smem& s) {
  const int lane = gk_lane(), wave = gk_wave();
  const int nw = GK_BLOCK / warpSize;
  const gk_i64 m = wave_incl_max(v);
  if (lane == warpSize - 1) s.wave[wave] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    gk_i64 b = s.wave[0];
    for (int w = 1; w < nw; ++w) b = s.wave[w] > b ? s.wave[w] : b;
    if (b > *(volatile gk_i64*)largest) atomicMax((unsigned long long*)largest, (unsigned long long)b);
  }
  __syncthreads();  // the scratch may be reused at once
}

}  // namespace gkf
