"""The reading of SASS that the sm_90 compile gate uses
(.ci/gates/sass.py): how many 128-bit loads of a run are issued before the first
instruction that reads the first load's registers, on synthetic listings in cuobjdump's
format (the gate itself needs nvcc and cuobjdump)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                ".ci"))

from gates.sass import kernels_sass, load_runs, tile_loads_problems  # noqa: E402


def _sass(lines):
    return "\n".join(f"        /*{16 * i:04x}*/                   {text} ;  /* 0x0 */"
                     for i, text in enumerate(lines))


def test_all_loads_before_the_first_fold():
    loads = [f"@!P{k % 7} LDG.E.128 R{4 + 4 * k}, desc[UR10][R58.64+0x{64 * k:x}]"
             for k in range(8)]
    runs = load_runs(_sass(["IADD3 R1, R2, R3, RZ", *loads, "DADD R4, R4, R50",
                            "DADD R6, R6, R4"]))
    assert len(runs) == 1
    assert runs[0]["at"] == "0010" and runs[0]["loads_before_first_use"] == 8
    assert runs[0]["first_use"].endswith("DADD R4, R4, R50")


def test_first_vector_folded_before_the_other_loads():
    # the order ptxas once chose: load, fold it, then the other seven
    lines = ["@!P0 LDG.E.128 R36, desc[UR10][R8.64]", "ISETP.LT.U32.AND P3, PT, R45, 0x201, PT",
             "DADD R36, R36, R34"]
    lines += [f"@!P1 LDG.E.128 R{8 + 4 * k}, desc[UR10][R12.64]" for k in range(7)]
    lines += ["DADD R8, R8, R36"]
    runs = load_runs(_sass(lines))
    assert [r["loads_before_first_use"] for r in runs] == [1]
    assert runs[0]["first_use"] == "0020: DADD R36, R36, R34"


def test_a_register_named_as_a_prefix_is_not_a_use():
    # R40 is not R4: uses are matched as whole register names, and a load writing the
    # next registers does not count as a use either
    lines = ["LDG.E.128 R4, desc[UR10][R2.64]", "IADD3 R40, R41, R42, RZ",
             "LDG.E.128 R8, desc[UR10][R2.64+0x200]", "FADD R5, R5, R9"]
    runs = load_runs(_sass(lines))
    assert runs[0]["loads_before_first_use"] == 2
    assert runs[0]["first_use"] == "0030: FADD R5, R5, R9"


def test_separate_runs_are_reported_separately():
    one = ["LDG.E.128 R4, desc[UR10][R2.64]", "DADD R4, R4, R6"]
    filler = ["NOP"] * 130
    runs = load_runs(_sass(one + filler + one))
    assert [r["loads_before_first_use"] for r in runs] == [1, 1]
    assert runs[1]["at"] == f"{16 * 132:04x}"


def test_runs_of_four_loads_for_four_byte_values():
    # 128 bytes per lane of 4-byte values: four vectors per tile, so two tiles' runs back
    # to back are two runs
    tile = [f"LDG.E.128 R{4 + 4 * k}, desc[UR10][R2.64+0x{512 * k:x}]" for k in range(4)]
    runs = load_runs(_sass(tile + ["FADD R4, R4, R40"] + tile + ["FADD R4, R4, R40"]),
                     per_run=4)
    assert [(r["at"], r["loads_before_first_use"]) for r in runs] == [("0000", 4), ("0050", 4)]


def test_the_gate_names_a_tile_folded_before_its_loads():
    ordered = [f"LDG.E.128 R{4 + 4 * k}, desc[UR10][R2.64+0x{512 * k:x}]" for k in range(8)]
    assert tile_loads_problems(_sass(ordered + ["DADD R4, R4, R40"]), 8) == []
    folded = ordered[:1] + ["DADD R4, R4, R40"] + ordered[1:]
    problems = tile_loads_problems(_sass(folded), 8)
    assert len(problems) == 1
    assert problems[0].startswith("only 1 of 8 128-bit loads of the tile at 0000")
    assert "DADD R4, R4, R40" in problems[0]
    # a kernel that promises the order but has no 128-bit loads at all fails too
    assert "no 128-bit loads" in tile_loads_problems(_sass(["DADD R4, R4, R40"]), 8)[0]


def test_a_listing_is_split_by_function(tmp_path):
    listing = ("\n\tcode for sm_90\n\t\tFunction : gk_a_per_wave\n" + _sass(["NOP"])
               + "\n\t\tFunction : gk_b_per_wave\n" + _sass(["EXIT"]) + "\n")
    tool = tmp_path / "cuobjdump"
    tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}EOF\n")
    tool.chmod(0o755)
    funcs = kernels_sass(str(tool), "unused.cubin")
    assert sorted(funcs) == ["gk_a_per_wave", "gk_b_per_wave"]
    assert "NOP" in funcs["gk_a_per_wave"] and "EXIT" not in funcs["gk_a_per_wave"]
    assert "EXIT" in funcs["gk_b_per_wave"]


def test_loads_with_cache_hints_are_128_bit_loads():
    # ld.global.cs compiles to LDG.E.EF.128, a 256-byte L2 prefetch to LDG.E.LTC256B.128;
    # 64-bit loads stay out
    hinted = ["LDG.E.EF.128 R4, desc[UR10][R2.64]",
              "LDG.E.NA.LTC256B.128.CONSTANT R8, desc[UR10][R2.64+0x200]",
              "LDG.E.64 R12, desc[UR10][R2.64+0x400]", "DADD R4, R4, R8"]
    runs = load_runs(_sass(hinted))
    assert [r["loads_before_first_use"] for r in runs] == [2]
