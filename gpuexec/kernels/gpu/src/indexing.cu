// Indexing kernels (one portable source for CUDA and HIP): the gathers and list
// compactions behind x[index], x[jagged_bool] and ak.to_packed. Contract: the docstring of
// gpuexec/kernels/cpu/indexing.py (same names, same results).
//
// A compile unit selects one family (GK_FAMILY_*) and one strategy (GK_VARIANT_*):
//   CARRY    carry: out[i] = values[index[i]], by element width (1, 2, 4, 8 bytes).
//            split/fused: each thread gathers a run of outputs; index loads and output
//            stores are 128-bit vectors, and a group of indices that is one aligned run
//            (x[i:j], packing) is read with a single vector load. naive: one element per
//            thread, scalar.
//   OFFSETS  compact_offsets (a scan of list lengths), rebase_offsets and offsets_summary
//            (the API layer's check: order, longest and long lists, ends; one flat pass).
//            split: tiles -> scan_tiles -> down (three lean passes, no atomics);
//            fused: one pass with decoupled look-back. naive: as split.
//   GATHER   list_carry_index, local_to_global, missing_repeat: flattened over the output
//            (index) positions. split: partition pass + gather pass; fused: the gather pass
//            searches its tile's first list itself. naive: one thread per list.
//   FILTER   filter, filter_missing (count + scan + fill). split: partition, tile counts,
//            scan_tiles, fill (4 launches, output sized exactly); fused: one pass with
//            look-back that counts, scans and fills (output sized by the mask length);
//            naive: per-list count, list scan, per-list fill.
// Kernels validate nothing (the API layer does).

#include "flat.cuh"

#ifndef GK_ITEMS
#define GK_ITEMS 8
#endif
#define GK_LB GK_LAUNCH_BOUNDS(GK_BLOCK, GK_MIN_BLOCKS)

namespace gki {
using namespace gkf;

enum : int {
  ITEMS = GK_ITEMS,          // flattened positions per thread
  TILE = GK_BLOCK * ITEMS,
  FITEMS = 16,               // mask positions per thread (one 128-bit load)
  FTILE = GK_BLOCK * FITEMS,
};

// ---------------------------------------------------------------------------------------
// carry
template <class T> struct carry_shape {
  // outputs per thread: one 128-bit vector of output (index loads: 16 to 128 bytes)
  static constexpr int N = sizeof(T) == 8 ? 2 : (sizeof(T) == 4 ? 4 : 16 / (int)sizeof(T));
};

template <class T>
__device__ __forceinline__ void carry_vec_body(const T* __restrict__ values,
                                               const gk_i64* __restrict__ index, gk_i64 n,
                                               T* __restrict__ out) {
  constexpr int N = carry_shape<T>::N;
  constexpr int VB = GK_VEC_BYTES >= (int)sizeof(T) ? GK_VEC_BYTES : (int)sizeof(T);
  constexpr int G = (N * (int)sizeof(T)) % VB == 0 ? VB / (int)sizeof(T) : 1;  // elements per vector
  const gk_i64 i0 = global_thread() * N;
  if (i0 >= n) return;
  gk_i64 idx[N];
  load_run(idx, index, i0, n);
  T v[N];
#pragma unroll
  for (int g = 0; g < N; g += G) {
    bool run = G > 1 && i0 + g + G <= n;
#pragma unroll
    for (int e = 1; e < G; ++e) run = run && idx[g + e] == idx[g] + e;
    const T* src = values + idx[g];
    if constexpr (G > 1) {
      if (run && ((unsigned long long)src % (G * sizeof(T))) == 0) {
        typedef typename vec_of<G * (int)sizeof(T)>::type V;
        vec_view<V, T> u;
        u.v = *reinterpret_cast<const V*>(src);
#pragma unroll
        for (int e = 0; e < G; ++e) v[g + e] = u.e[e];
        continue;
      }
    }
    {
#pragma unroll
      for (int e = 0; e < G; ++e) v[g + e] = i0 + g + e < n ? values[idx[g + e]] : T(0);
    }
  }
  store_run(out, i0, n, v);
}

template <class T>
__device__ __forceinline__ void carry_naive_body(const T* __restrict__ values,
                                                 const gk_i64* __restrict__ index, gk_i64 n,
                                                 T* __restrict__ out) {
  const gk_i64 i = global_thread();
  if (i < n) out[i] = values[index[i]];
}

// ---------------------------------------------------------------------------------------
// rebase_offsets: out[i] = off[i] - off[0]; *n_bad += number of decreasing steps
__device__ __forceinline__ void rebase_body(const gk_i64* __restrict__ off, gk_i64 len,
                                            gk_i64* __restrict__ out, gk_i64* n_bad) {
  __shared__ scan_smem s;
  const gk_i64 i0 = global_thread() * ITEMS;
  gk_i64 v[ITEMS];
  load_run(v, off, i0, len);
  gk_i64 prev = (i0 > 0 && i0 < len) ? off[i0 - 1] : v[0];
  const gk_i64 first = off[0];
  gk_i64 bad = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    if (i0 + j < len) bad += v[j] < prev ? 1 : 0;
    prev = v[j];
    v[j] -= first;
  }
  store_run(out, i0, len, v);
  block_count_into(bad, n_bad, s);
}

// ---------------------------------------------------------------------------------------
// offsets_summary: the API layer's offsets check in one read of ``off`` (len = n + 1
// entries), answered by one small host copy: sum[0] += decreasing steps, sum[1] = the
// longest list (max), sum[2] += lists longer than max(factor x the mean, floor),
// sum[3] = off[0], sum[4] = off[n]. ``sum`` starts zeroed. The bound is computed as the
// host check computes it, (off[n] - off[0]) * (factor / n) in double, so both count alike.
__device__ __forceinline__ void summary_body(const gk_i64* __restrict__ off, gk_i64 len,
                                             gk_u64 factor_bits, gk_i64 floor,
                                             gk_i64* __restrict__ sum) {
  __shared__ scan_smem s;
  const gk_i64 n = len - 1;
  const gk_i64 first = off[0], last = off[n];
  double bound = (double)floor;
  if (n > 0) {
    const double scaled = (double)(last - first) * (gk_from_bits<double>(factor_bits) / (double)n);
    bound = scaled > bound ? scaled : bound;
  }
  const gk_i64 i0 = global_thread() * ITEMS;
  gk_i64 v[ITEMS];
  load_run(v, off, i0, len);
  gk_i64 prev = (i0 > 0 && i0 < len) ? off[i0 - 1] : v[0];
  gk_i64 down = 0, longest = 0, many = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    if (i0 + j < len) {
      const gk_i64 length = v[j] - prev;  // the list ending at i0 + j (0 for entry 0)
      down += length < 0 ? 1 : 0;
      longest = length > longest ? length : longest;
      many += (double)length > bound ? 1 : 0;
    }
    prev = v[j];
  }
  block_count_into(down, sum, s);
  block_max_into(longest, sum + 1, s);
  block_count_into(many, sum + 2, s);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    sum[3] = first;
    sum[4] = last;
  }
}

// ---------------------------------------------------------------------------------------
// gathers flattened over positions of ``off``'s lists. The tile's first list comes from
// the partition pass (split) or a search by the block (fused): tile_first_list, flat.cuh.

// out[pos] = starts[list] + (pos - list start), positions of the lists of ``off``
template <bool SEARCH>
__device__ __forceinline__ void list_carry_index_flat(const gk_i64* __restrict__ starts,
                                                      const gk_i64* __restrict__ off, gk_i64 n,
                                                      const gk_i64* __restrict__ P,
                                                      gk_i64* __restrict__ out) {
  __shared__ owner_smem<ITEMS> sm;
  const gk_i64 base = off[0], total = off[n] - base;
  const gk_i64 t0 = (gk_i64)blockIdx.x * TILE;
  const gk_i64 p = tile_first_list<SEARCH>(off, n, t0, P, sm.scan);
  gk_i64 own = tile_owners<ITEMS>(off, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  gk_i64 v[ITEMS];
  gk_i64 delta = 0;  // out = pos + delta inside the current list
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    if (h[j] >= 0) {
      own = p + h[j];
      delta = starts[own] - pos;
    } else if (j == 0 && pos < total) {
      delta = starts[own] - (off[own] - base);
    }
    v[j] = pos + delta;
  }
  store_run(out, pos0, total, v);
}

__device__ __forceinline__ void list_carry_index_naive(const gk_i64* __restrict__ starts,
                                                       const gk_i64* __restrict__ off, gk_i64 n,
                                                       gk_i64* __restrict__ out) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 s = starts[i], o = off[i] - off[0], m = off[i + 1] - off[i];
  for (gk_i64 k = 0; k < m; ++k) out[o + k] = s + k;
}

// local_to_global / missing_repeat: index[j] (local, negative wraps) of list i -> content
// position; out-of-range picks -> -1 and counted; valid[j] false -> -1 (not counted)
template <bool SEARCH, bool MISSING>
__device__ __forceinline__ void local_to_global_flat(const gk_i64* __restrict__ starts,
                                                     const gk_i64* __restrict__ stops,
                                                     const gk_i64* __restrict__ ioff, gk_i64 n,
                                                     const gk_i64* __restrict__ index,
                                                     const unsigned char* __restrict__ valid,
                                                     const gk_i64* __restrict__ P,
                                                     gk_i64* __restrict__ out, gk_i64* n_bad) {
  __shared__ owner_smem<ITEMS> sm;
  const gk_i64 base = ioff[0], total = ioff[n] - base;
  const gk_i64 t0 = (gk_i64)blockIdx.x * TILE;
  const gk_i64 pos0 = t0 + (gk_i64)threadIdx.x * ITEMS;
  gk_i64 k[ITEMS];
  load_run(k, index + base, pos0, total);
  unsigned char ok[ITEMS];
  if constexpr (MISSING) {
    load_run(ok, valid + base, pos0, total);
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) ok[j] = 1;
  }
  const gk_i64 p = tile_first_list<SEARCH>(ioff, n, t0, P, sm.scan);
  gk_i64 own = tile_owners<ITEMS>(ioff, n, t0, total, p, sm, no_list_fn());
  int h[ITEMS];
  thread_heads(sm, h);
  gk_i64 v[ITEMS];
  gk_i64 s = 0, len = 0, bad = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const gk_i64 pos = pos0 + j;
    if (h[j] >= 0 || (j == 0 && pos < total)) {
      if (h[j] >= 0) own = p + h[j];
      s = starts[own];
      len = stops[own] - s;
    }
    gk_i64 q = k[j] < 0 ? k[j] + len : k[j];
    const bool in = q >= 0 && q < len;
    const bool none = !ok[j];
    bad += (pos < total && !in && !none) ? 1 : 0;
    v[j] = (in && !none) ? s + q : -1;
  }
  store_run(out, pos0, total, v);
  block_count_into(bad, n_bad, sm.scan);
}

template <bool MISSING>
__device__ __forceinline__ void local_to_global_naive(const gk_i64* __restrict__ starts,
                                                      const gk_i64* __restrict__ stops,
                                                      const gk_i64* __restrict__ ioff, gk_i64 n,
                                                      const gk_i64* __restrict__ index,
                                                      const unsigned char* __restrict__ valid,
                                                      gk_i64* __restrict__ out, gk_i64* n_bad) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  const gk_i64 base = ioff[0], s = starts[i], len = stops[i] - s;
  gk_i64 bad = 0;
  for (gk_i64 j = ioff[i]; j < ioff[i + 1]; ++j) {
    if (MISSING && !valid[j]) {
      out[j - base] = -1;
      continue;
    }
    gk_i64 q = index[j];
    if (q < 0) q += len;
    if (q < 0 || q >= len) {
      out[j - base] = -1;
      ++bad;
    } else {
      out[j - base] = s + q;
    }
  }
  if (bad) atomicAdd((unsigned long long*)n_bad, (unsigned long long)bad);
}

// ---------------------------------------------------------------------------------------
// filter: keep[pos] = mask (or, with MISSING, mask || !valid) over the mask positions;
// offsets[i] = kept positions before list i's start; carry[kept j] = starts[i] + local
// position (MISSING: -1 where not valid).
// Bit j set where byte j of the 8-byte word is non-zero (SWAR: no per-byte compares, which
// a 64-lane compiler would keep alive as one scalar lane mask per byte).
__device__ __forceinline__ unsigned nonzero_bytes(gk_u64 x) {
  const gk_u64 t = (((x & 0x7F7F7F7F7F7F7F7Full) + 0x7F7F7F7F7F7F7F7Full) | x) & 0x8080808080808080ull;
  return (unsigned)((t * 0x0002040810204081ull) >> 56);
}

// Bits of the 16 bytes at p[pos0 ...] that are non-zero (0 at positions >= limit): one
// 128-bit load when whole and aligned, byte loads otherwise.
__device__ __forceinline__ unsigned byte_bits16(const unsigned char* __restrict__ p, gk_i64 pos0,
                                                gk_i64 limit) {
  const unsigned char* src = p + pos0;
  gk_u64 lo = 0, hi = 0;
  if (pos0 + 16 <= limit && ((unsigned long long)src % GK_VEC_BYTES) == 0) {
    const gk_vec_t* v = reinterpret_cast<const gk_vec_t*>(src);
#if GK_VEC_BYTES == 16
    const gk_vec16 w = v[0];
    lo = w.lo;
    hi = w.hi;
#else
    lo = v[0].lo;
    hi = v[1].lo;
#endif
  } else {
    for (int j = 0; j < 16; ++j) {
      const gk_u64 b = pos0 + j < limit ? (gk_u64)src[j] : 0;
      if (j < 8) lo |= b << (8 * j); else hi |= b << (8 * (j - 8));
    }
  }
  return nonzero_bytes(lo) | (nonzero_bytes(hi) << 8);
}

template <bool MISSING>
struct keep_bits {
  const unsigned char* __restrict__ mask;   // already offset by mask_offsets[0]
  const unsigned char* __restrict__ valid;  // likewise (MISSING only)
  gk_i64 m;
  // bit j: position pos0 + j is kept; *okbits bit j: it exists and is valid (not None)
  __device__ __forceinline__ unsigned operator()(gk_i64 pos0, unsigned* okbits) const {
    static_assert(FITEMS == 16, "16 mask bytes per thread");
    const gk_i64 left = m - pos0;
    const unsigned here = left >= 16 ? 0xFFFFu : (left <= 0 ? 0u : (1u << left) - 1u);
    const unsigned sel = byte_bits16(mask, pos0, m);
    const unsigned ok = MISSING ? byte_bits16(valid, pos0, m) & here : here;
    *okbits = ok;
    return (sel | ~ok) & here;
  }
};

struct filter_smem {
  owner_smem<FITEMS> own;
  gk_i64 first_kept[GK_BLOCK];  // kept positions before each thread's run
  unsigned keep[GK_BLOCK];
};

// The fill shared by split and fused: tile k's kept positions are numbered from
// ``tile_prefix``; ``excl`` is this thread's exclusive count inside the tile.
template <bool MISSING>
__device__ __forceinline__ void filter_fill_tile(const gk_i64* __restrict__ starts,
                                                 const gk_i64* __restrict__ moff, gk_i64 n,
                                                 gk_i64 m, gk_i64 t0, gk_i64 p, unsigned keep,
                                                 unsigned ok, gk_i64 tile_prefix, gk_i64 excl,
                                                 gk_i64 tile_total, filter_smem& sm,
                                                 gk_i64* __restrict__ offsets,
                                                 gk_i64* __restrict__ carry) {
  const int tid = threadIdx.x;
  sm.first_kept[tid] = tile_prefix + excl;
  sm.keep[tid] = keep;
  __syncthreads();
  const gk_i64 end_count = tile_prefix + tile_total;
  const auto on_list = [&](gk_i64 i, gk_i64 rel) {
    gk_i64 e;
    if (rel >= FTILE) {
      e = end_count;
    } else {
      const int t = (int)(rel / FITEMS), j = (int)(rel % FITEMS);
      e = sm.first_kept[t] + __popc(sm.keep[t] & ((1u << j) - 1u));
    }
    offsets[i] = e;
  };
  gk_i64 own = tile_owners<FITEMS>(moff, n, t0, m, p, sm.own, on_list);
  if (t0 + FTILE >= m && tid == 0) offsets[n] = end_count;
  int h[FITEMS];
  thread_heads(sm.own, h);
  const gk_i64 base = moff[0];
  const gk_i64 pos0 = t0 + (gk_i64)tid * FITEMS;
  gk_i64 w = tile_prefix + excl;
  // branch-free walk (selects, one load per kept position): divergent branches per
  // position would hold an exec mask each in scalar registers on 64-lane wavefronts
  gk_i64 lstart = (own >= 0 && pos0 < m) ? moff[own] - base : 0;
#pragma unroll
  for (int j = 0; j < FITEMS; ++j) {
    const bool head = h[j] >= 0;
    own = head ? p + h[j] : own;
    lstart = head ? pos0 + j : lstart;
    if ((keep >> j) & 1u) {
      const gk_i64 none = MISSING ? -(gk_i64)(((ok >> j) & 1u) ^ 1u) : 0;  // -1: None
      carry[w] = (starts[own] + (pos0 + j - lstart)) | none;
      ++w;
    }
  }
}

// split, pass 2: kept positions per tile
template <bool MISSING>
__device__ __forceinline__ void filter_tiles_body(const gk_i64* __restrict__ moff, gk_i64 n,
                                                  const unsigned char* __restrict__ mask,
                                                  const unsigned char* __restrict__ valid,
                                                  gk_i64* __restrict__ sums) {
  __shared__ scan_smem s;
  const gk_i64 base = moff[0], m = moff[n] - base;
  const keep_bits<MISSING> kb{mask + base, MISSING ? valid + base : nullptr, m};
  unsigned ok;
  const unsigned keep = kb(global_thread() * FITEMS, &ok);
  gk_i64 total;
  block_excl_sum(__popc(keep), s, total);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// split, pass 4 (after partition and scan_tiles): offsets and carry
template <bool MISSING>
__device__ __forceinline__ void filter_fill_body(const gk_i64* __restrict__ starts,
                                                 const gk_i64* __restrict__ moff, gk_i64 n,
                                                 const unsigned char* __restrict__ mask,
                                                 const unsigned char* __restrict__ valid,
                                                 const gk_i64* __restrict__ P,
                                                 const gk_i64* __restrict__ sums,
                                                 gk_i64* __restrict__ offsets,
                                                 gk_i64* __restrict__ carry) {
  __shared__ filter_smem sm;
  const gk_i64 base = moff[0], m = moff[n] - base;
  const gk_i64 t0 = (gk_i64)blockIdx.x * FTILE;
  const keep_bits<MISSING> kb{mask + base, MISSING ? valid + base : nullptr, m};
  unsigned ok;
  const unsigned keep = kb(t0 + (gk_i64)threadIdx.x * FITEMS, &ok);
  gk_i64 total;
  const gk_i64 excl = block_excl_sum(__popc(keep), sm.own.scan, total);
  filter_fill_tile<MISSING>(starts, moff, n, m, t0, P[blockIdx.x], keep, ok, sums[blockIdx.x],
                            excl, total, sm, offsets, carry);
}

// fused: one pass; tiles by ticket, look-back for the tile prefix, search for the first list
template <bool MISSING>
__device__ __forceinline__ void filter_fused_body(const gk_i64* __restrict__ starts,
                                                  const gk_i64* __restrict__ moff, gk_i64 n,
                                                  const unsigned char* __restrict__ mask,
                                                  const unsigned char* __restrict__ valid,
                                                  gk_u64* status, gk_i64* __restrict__ offsets,
                                                  gk_i64* __restrict__ carry) {
  __shared__ filter_smem sm;
  const gk_i64 base = moff[0], m = moff[n] - base;
  const gk_i64 k = take_ticket(status, sm.own.scan);
  const gk_i64 t0 = k * FTILE;
  const keep_bits<MISSING> kb{mask + base, MISSING ? valid + base : nullptr, m};
  unsigned ok;
  const unsigned keep = kb(t0 + (gk_i64)threadIdx.x * FITEMS, &ok);
  gk_i64 total;
  const gk_i64 excl = block_excl_sum(__popc(keep), sm.own.scan, total);
  gk_i64 p;
  const gk_i64 prefix = look_back_and_first_list(status, k, total, moff, n, t0, sm.own.scan, p);
  filter_fill_tile<MISSING>(starts, moff, n, m, t0, p, keep, ok, prefix, excl, total, sm,
                            offsets, carry);
}

// naive: one thread per list, count then fill
template <bool MISSING>
__device__ __forceinline__ void filter_count_naive(const gk_i64* __restrict__ moff, gk_i64 n,
                                                   const unsigned char* __restrict__ mask,
                                                   const unsigned char* __restrict__ valid,
                                                   gk_i64* __restrict__ counts) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  gk_i64 c = 0;
  for (gk_i64 j = moff[i]; j < moff[i + 1]; ++j) c += (mask[j] || (MISSING && !valid[j])) ? 1 : 0;
  counts[i] = c;
}

template <bool MISSING>
__device__ __forceinline__ void filter_fill_naive(const gk_i64* __restrict__ starts,
                                                  const gk_i64* __restrict__ moff, gk_i64 n,
                                                  const unsigned char* __restrict__ mask,
                                                  const unsigned char* __restrict__ valid,
                                                  const gk_i64* __restrict__ offsets,
                                                  gk_i64* __restrict__ carry) {
  const gk_i64 i = global_thread();
  if (i >= n) return;
  gk_i64 w = offsets[i];
  const gk_i64 s = starts[i], m0 = moff[i];
  for (gk_i64 j = m0; j < moff[i + 1]; ++j) {
    const bool isok = !MISSING || valid[j];
    if (mask[j] || !isok) carry[w++] = isok ? s + (j - m0) : -1;
  }
}

}  // namespace gki

// ---------------------------------------------------------------------------------------
// extern "C" entry points. Scalars are int64 (the launcher passes every scalar as one).
#if !defined(GK_VARIANT_SPLIT) && !defined(GK_VARIANT_FUSED) && !defined(GK_VARIANT_NAIVE)
#error "define one of GK_VARIANT_SPLIT, GK_VARIANT_FUSED, GK_VARIANT_NAIVE"
#endif

#define GK_CARRY_WIDTHS(X) \
  X(b8, unsigned char) X(b16, unsigned short) X(b32, unsigned) X(b64, unsigned long long)

#if defined(GK_FAMILY_CARRY)
#if defined(GK_VARIANT_NAIVE)
#define GK_CARRY(W, T)                                                                        \
  extern "C" __global__ void GK_LB gk_carry_##W##_naive(const T* values, const gk_i64* index, \
                                                        gk_i64 n, T* out) {                   \
    gki::carry_naive_body<T>(values, index, n, out);                                          \
  }
#else
#define GK_CARRY(W, T)                                                                      \
  extern "C" __global__ void GK_LB gk_carry_##W##_vec(const T* values, const gk_i64* index, \
                                                      gk_i64 n, T* out) {                   \
    gki::carry_vec_body<T>(values, index, n, out);                                          \
  }
#endif
GK_CARRY_WIDTHS(GK_CARRY)
#endif  // GK_FAMILY_CARRY

// list scans and the partition pass, shared by several families
#define GK_SCAN_TILES                                                                   \
  extern "C" __global__ void GK_LB gk_scan_tiles(gk_i64* sums, gk_i64 ntiles) {         \
    gkf::scan_tiles_body(sums, ntiles);                                                 \
  }
#define GK_PARTITION                                                                    \
  extern "C" __global__ void GK_LB gk_partition(const gk_i64* off, gk_i64 n, gk_i64 tile, \
                                               gk_i64 ntiles, gk_i64* P) {              \
    gkf::partition_body(off, n, tile, ntiles, P);                                       \
  }

#if defined(GK_FAMILY_OFFSETS)
extern "C" __global__ void GK_LB gk_rebase_offsets(const gk_i64* off, gk_i64 len, gk_i64* out,
                                                   gk_i64* n_bad) {
  gki::rebase_body(off, len, out, n_bad);
}
extern "C" __global__ void GK_LB gk_offsets_summary(const gk_i64* off, gk_i64 len,
                                                    gk_u64 factor_bits, gk_i64 floor,
                                                    gk_i64* sum) {
  gki::summary_body(off, len, factor_bits, floor, sum);
}
#if defined(GK_VARIANT_FUSED)
extern "C" __global__ void GK_LB gk_compact_fused(const gk_i64* starts, const gk_i64* stops,
                                                  gk_i64 n, gk_u64* status, gk_i64* out) {
  gkf::list_fused_body(gkf::LengthCount{starts, stops}, n, status, out);
}
#else
GK_SCAN_TILES
extern "C" __global__ void GK_LB gk_compact_tiles(const gk_i64* starts, const gk_i64* stops,
                                                  gk_i64 n, gk_i64* sums) {
  gkf::list_tiles_body(gkf::LengthCount{starts, stops}, n, sums);
}
extern "C" __global__ void GK_LB gk_compact_down(const gk_i64* starts, const gk_i64* stops,
                                                 gk_i64 n, const gk_i64* sums, gk_i64* out) {
  gkf::list_down_body(gkf::LengthCount{starts, stops}, n, sums, out);
}
#endif
#endif  // GK_FAMILY_OFFSETS

#if defined(GK_FAMILY_GATHER)
// one thread per list: the naive strategy's kernels, and every strategy's choice for lists
// of about one position each (launchers.py), where a flattened tile spends more on finding
// its lists than on their positions
extern "C" __global__ void GK_LB gk_list_carry_index_perlist(const gk_i64* starts, const gk_i64* off,
                                                             gk_i64 n, const gk_i64* P, gk_i64* out) {
  gki::list_carry_index_naive(starts, off, n, out);
}
extern "C" __global__ void GK_LB gk_local_to_global_perlist(
    const gk_i64* starts, const gk_i64* stops, const gk_i64* ioff, gk_i64 n, const gk_i64* index,
    const unsigned char* valid, const gk_i64* P, gk_i64* out, gk_i64* n_bad) {
  gki::local_to_global_naive<false>(starts, stops, ioff, n, index, valid, out, n_bad);
}
extern "C" __global__ void GK_LB gk_missing_repeat_perlist(
    const gk_i64* starts, const gk_i64* stops, const gk_i64* ioff, gk_i64 n, const gk_i64* index,
    const unsigned char* valid, const gk_i64* P, gk_i64* out, gk_i64* n_bad) {
  gki::local_to_global_naive<true>(starts, stops, ioff, n, index, valid, out, n_bad);
}
#if !defined(GK_VARIANT_NAIVE)
#if defined(GK_VARIANT_SPLIT)
#define GK_GATHER_SEARCH false
#define GK_GATHER_SUFFIX split
GK_PARTITION
#else
#define GK_GATHER_SEARCH true
#define GK_GATHER_SUFFIX fused
#endif
#define GK_CAT2(a, b) a##b
#define GK_CAT(a, b) GK_CAT2(a, b)
extern "C" __global__ void GK_LB GK_CAT(gk_list_carry_index_, GK_GATHER_SUFFIX)(
    const gk_i64* starts, const gk_i64* off, gk_i64 n, const gk_i64* P, gk_i64* out) {
  gki::list_carry_index_flat<GK_GATHER_SEARCH>(starts, off, n, P, out);
}
extern "C" __global__ void GK_LB GK_CAT(gk_local_to_global_, GK_GATHER_SUFFIX)(
    const gk_i64* starts, const gk_i64* stops, const gk_i64* ioff, gk_i64 n, const gk_i64* index,
    const unsigned char* valid, const gk_i64* P, gk_i64* out, gk_i64* n_bad) {
  gki::local_to_global_flat<GK_GATHER_SEARCH, false>(starts, stops, ioff, n, index, valid, P, out,
                                                     n_bad);
}
extern "C" __global__ void GK_LB GK_CAT(gk_missing_repeat_, GK_GATHER_SUFFIX)(
    const gk_i64* starts, const gk_i64* stops, const gk_i64* ioff, gk_i64 n, const gk_i64* index,
    const unsigned char* valid, const gk_i64* P, gk_i64* out, gk_i64* n_bad) {
  gki::local_to_global_flat<GK_GATHER_SEARCH, true>(starts, stops, ioff, n, index, valid, P, out,
                                                    n_bad);
}
#endif
#endif  // GK_FAMILY_GATHER

#if defined(GK_FAMILY_FILTER)
#define GK_FILTER_KERNELS(NAME, MISSING)                                                          \
  GK_FILTER_VARIANT(NAME, MISSING)
#if defined(GK_VARIANT_SPLIT)
GK_PARTITION
GK_SCAN_TILES
#define GK_FILTER_VARIANT(NAME, MISSING)                                                          \
  extern "C" __global__ void GK_LB gk_##NAME##_tiles(const gk_i64* moff, gk_i64 n,                \
                                                     const unsigned char* mask,                   \
                                                     const unsigned char* valid, gk_i64* sums) {  \
    gki::filter_tiles_body<MISSING>(moff, n, mask, valid, sums);                                  \
  }                                                                                               \
  extern "C" __global__ void GK_LB gk_##NAME##_fill(                                              \
      const gk_i64* starts, const gk_i64* moff, gk_i64 n, const unsigned char* mask,              \
      const unsigned char* valid, const gk_i64* P, const gk_i64* sums, gk_i64* offsets,           \
      gk_i64* carry) {                                                                            \
    gki::filter_fill_body<MISSING>(starts, moff, n, mask, valid, P, sums, offsets, carry);        \
  }
#elif defined(GK_VARIANT_FUSED)
#define GK_FILTER_VARIANT(NAME, MISSING)                                                          \
  extern "C" __global__ void GK_LB gk_##NAME##_fused(                                             \
      const gk_i64* starts, const gk_i64* moff, gk_i64 n, const unsigned char* mask,              \
      const unsigned char* valid, gk_u64* status, gk_i64* offsets, gk_i64* carry) {               \
    gki::filter_fused_body<MISSING>(starts, moff, n, mask, valid, status, offsets, carry);        \
  }
#else
GK_SCAN_TILES
extern "C" __global__ void GK_LB gk_counts_tiles(const gk_i64* counts, gk_i64 n, gk_i64* sums) {
  gkf::list_tiles_body(gkf::ArrayCount{counts}, n, sums);
}
extern "C" __global__ void GK_LB gk_counts_down(const gk_i64* counts, gk_i64 n, const gk_i64* sums,
                                                gk_i64* out) {
  gkf::list_down_body(gkf::ArrayCount{counts}, n, sums, out);
}
#define GK_FILTER_VARIANT(NAME, MISSING)                                                          \
  extern "C" __global__ void GK_LB gk_##NAME##_count_naive(                                       \
      const gk_i64* moff, gk_i64 n, const unsigned char* mask, const unsigned char* valid,        \
      gk_i64* counts) {                                                                           \
    gki::filter_count_naive<MISSING>(moff, n, mask, valid, counts);                               \
  }                                                                                               \
  extern "C" __global__ void GK_LB gk_##NAME##_fill_naive(                                        \
      const gk_i64* starts, const gk_i64* moff, gk_i64 n, const unsigned char* mask,              \
      const unsigned char* valid, const gk_i64* offsets, gk_i64* carry) {                         \
    gki::filter_fill_naive<MISSING>(starts, moff, n, mask, valid, offsets, carry);                \
  }
#endif
GK_FILTER_KERNELS(filter, false)
GK_FILTER_KERNELS(filter_missing, true)
#endif  // GK_FAMILY_FILTER
