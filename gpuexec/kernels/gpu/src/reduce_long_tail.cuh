// Long tails: the per-wave kernel with a block's streamed lists queued in shared memory,
// taken by whichever wave is free (docs/gpu-reduction.md#long-tails); its kernel is
// per_wave_body<LONG_TAIL>, its own block size and bound below.
#ifndef GK_REDUCE_LONG_TAIL_CUH
#define GK_REDUCE_LONG_TAIL_CUH

#include "reduce_wave_stream.cuh"

#ifndef GK_LONG_TAIL_BLOCK
#define GK_LONG_TAIL_BLOCK GK_PER_WAVE_BLOCK
#endif
#ifndef GK_LONG_TAIL_MIN_BLOCKS
#define GK_LONG_TAIL_MIN_BLOCKS GK_PER_WAVE_MIN_BLOCKS
#endif
static_assert(GK_LONG_TAIL_BLOCK % 64 == 0, "block sizes must be multiples of 64");

#endif  // GK_REDUCE_LONG_TAIL_CUH
