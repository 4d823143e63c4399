"""Register-limited occupancy, from the counts the compilers report.

CDNA2/3 (gfx90a, gfx942): each SIMD holds 512 VGPRs per lane (arch + AGPRs, one file),
allocated per wave in granules of 8; at most 8 waves per SIMD. The metadata's
.vgpr_count is already the unified total (arch VGPRs aligned to 4, plus AGPRs). SGPRs:
800 per SIMD, granules of 16.
Hopper (sm_90): 65536 32-bit registers per SM split over 4 sub-partitions, allocated per
warp in units of 256 registers; at most 64 resident warps per SM.
Block size and LDS/shared-memory limits are not applied here: they depend on the launch
configuration, which the strategy table owns.
"""

from __future__ import annotations

CDNA_VGPRS, CDNA_VGPR_GRANULE, CDNA_MAX_WAVES = 512, 8, 8
CDNA_SGPRS, CDNA_SGPR_GRANULE = 800, 16
SM90_REGS, SM90_PARTITIONS, SM90_REG_UNIT, SM90_MAX_WARPS = 65536, 4, 256, 64


def _round_up(n: int, granule: int) -> int:
    return -(-max(n, 1) // granule) * granule


def cdna_waves_per_simd(vgprs: int, sgprs: int) -> tuple[int, str]:
    """(waves per SIMD, what limits it)."""
    by_vgpr = CDNA_VGPRS // _round_up(vgprs, CDNA_VGPR_GRANULE)
    by_sgpr = CDNA_SGPRS // _round_up(sgprs, CDNA_SGPR_GRANULE)
    waves = min(by_vgpr, by_sgpr, CDNA_MAX_WAVES)
    limit = "max" if waves == CDNA_MAX_WAVES else ("VGPR" if by_vgpr <= by_sgpr else "SGPR")
    return waves, limit


def sm90_warps_per_sm(regs_per_thread: int) -> tuple[int, str]:
    per_warp = _round_up(regs_per_thread * 32, SM90_REG_UNIT)
    by_regs = (SM90_REGS // SM90_PARTITIONS // per_warp) * SM90_PARTITIONS
    warps = min(by_regs, SM90_MAX_WARPS)
    return warps, "max" if warps == SM90_MAX_WARPS else "registers"
