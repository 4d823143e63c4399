"""A ``Plan``: what one GPU backend runs on one architecture, the policy row (policy.py)
with what a caller forced over it (``PlanRequest``), and the rule that picks a
reduction's kernel from the sizes of its input (``Plan.per_list_chooser``).

Short lists (mean length below the row's threshold) run one list per thread (CUB's
small-segment policy), longer ones the row's long-list kernel; where the offsets check
read the longest list back, a long tail sends every mean length to the long-list kernel
(docs/gpu-reduction.md#choosing-a-kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from gpuexec.kernels.gpu.catalog import (DEFAULT_LAUNCH, LONG_LIST_KERNELS, PER_LIST_KERNELS,
                                         STRATEGIES, TAIL_KERNELS, Launch, Strategy)
from gpuexec.kernels.gpu.policy import FEW_LONG, ArchRow, arch_row
from gpuexec.kernels.validate import LONG_LIST


class PerListRule(NamedTuple):
    """``per_list_chooser``'s rule for one op and dtype: lists shorter than ``below`` on
    average run the per-list kernel ``short`` where the content holds at least
    ``short_from`` bytes (per_thread on less); longer ones the ``long`` kernel (None:
    the strategy's flattened passes), or per_wave_staged on mean lengths in
    [``staged_from``, ``staged_below``). Where the longest list is known: up to
    max(``tail_factor`` x the mean, ``tail_floor``), per_thread_staged's threshold is
    ``bounded``; above, the ``long`` kernel runs whatever the mean, unless the long lists
    are counted and they times the longest are at most ``tail_few`` x the elements
    (``tail_few_staged`` where per_thread_staged would run); such a long tail runs ``tail``
    where given and at least ``tail_from`` of the lists are counted long."""

    below: float
    short: str
    long: str | None
    short_from: int
    staged_from: float
    staged_below: float
    bounded: float
    tail_factor: float
    tail_floor: float
    tail_few: float = 0.0
    tail_few_staged: float = 0.0
    tail: str | None = None  # the kernel for a long tail where ``long`` is per_wave
    tail_from: float = 0.0  # ... where at least this share of the lists is counted long



def _parse_launch(text: str) -> dict[str, dict]:
    """``"block=512,item_bytes=32"`` (reduce roles) or ``"fixup:block=128;fused:block=512"``."""
    out: dict[str, dict] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        role, _, kv = part.rpartition(":")
        fields = {}
        for item in filter(None, (x.strip() for x in kv.split(","))):
            key, _, val = item.partition("=")
            if key not in Launch.__dataclass_fields__:
                raise ValueError(f"launch: unknown field {key!r}")
            fields[key] = int(val)
        for r in ([role] if role else ["flat_split", "flat_fused", "per_thread"]):
            out.setdefault(r, {}).update(fields)
    return out


@dataclass(frozen=True)
class Plan:
    """What one backend instance runs on one architecture."""

    arch: str
    vendor: str
    wave: int
    strategy: Strategy
    launch: dict  # role -> Launch
    short_lists: dict = field(default_factory=dict)  # op[:dtype] -> mean length threshold
    per_list_kernels: dict = field(default_factory=lambda: {"*": "per_thread"})  # op -> role
    long_list_kernels: dict = field(default_factory=lambda: {"*": "flat"})  # op -> kernel
    family_per_list: dict = field(default_factory=dict)  # family -> tuple of ListWindow
    per_thread_staged_from_bytes: int = 0  # per_thread_staged on smaller content: per_thread
    per_wave_staged_lists: dict = field(default_factory=dict)  # op[:dtype] -> (from, below) mean
    per_thread_staged_lists: dict = field(default_factory=dict)  # op[:dtype] -> threshold, bounded tails
    # a longest list up to max(factor x mean, floor), or long lists x longest at most few
    # x the elements: no long tail (factor, floor, few, few for per_thread_staged)
    tail: tuple = (*LONG_LIST, *FEW_LONG)
    tail_lists: dict = field(default_factory=dict)  # op[:dtype] -> kernel for a long tail
    tail_from: float = 0.0  # ... where at least this share of the lists is long

    def family_runs_per_list(self, family: str, n_lists: int, n_elements: int) -> bool:
        """Whether a flattened strategy runs ``family``'s per-list kernels on these lists
        (one of the family's windows holds)."""
        if not self.strategy.flatten:
            return False
        return any(w.holds(n_lists, n_elements, self.strategy.name)
                   for w in self.family_per_list.get(family, ()))

    def short_list_threshold(self, op: str, dtype: str | None = None) -> float:
        """The mean list length below which a flattened strategy reduces ``op`` on
        ``dtype`` one list per thread (0: never)."""
        return _per_op(self.short_lists, op, 0, dtype) if self.strategy.flatten else 0

    def per_list(self, op: str, n_lists: int, n_elements: int) -> bool:
        """Whether a flattened strategy reduces these lists one per thread instead."""
        if n_lists <= 0:
            return False
        return n_elements < self.short_list_threshold(op) * n_lists

    def per_list_kernel(self, op: str, dtype: str | None = None) -> str:
        """The per-list kernel (role) that reduces ``op`` on ``dtype`` content one list per
        thread (inputs of at least ``per_thread_staged_from_bytes`` where it is
        ``per_thread_staged``)."""
        return _per_op(self.per_list_kernels, op, "per_thread", dtype)

    def long_list_kernel(self, op: str) -> str:
        """What reduces ``op`` on lists above the short-list threshold (LONG_LIST_KERNELS)."""
        return _per_op(self.long_list_kernels, op, "flat")

    def per_list_rule(self, op: str, dtype: str | None = None) -> "PerListRule":
        """How ``per_list_chooser`` maps ``op`` on ``dtype`` (``PerListRule``)."""
        long = self.long_list_kernel(op)
        short = self.per_list_kernel(op, dtype)
        below = self.short_list_threshold(op, dtype)
        wave = long == "per_wave"
        staged = _per_op(self.per_wave_staged_lists, op, (0, 0), dtype) if wave else (0, 0)
        tail = _per_op(self.tail_lists, op, long, dtype) if wave else None
        bounded = below
        if short == "per_thread_staged" and self.strategy.flatten:
            bounded = _per_op(self.per_thread_staged_lists, op, below, dtype)
        return PerListRule(below=below, short=short, long=None if long == "flat" else long,
                           short_from=(self.per_thread_staged_from_bytes
                                       if short == "per_thread_staged" else 0),
                           staged_from=staged[0], staged_below=staged[1], bounded=bounded,
                           tail_factor=self.tail[0], tail_floor=self.tail[1],
                           tail_few=self.tail[2], tail_few_staged=self.tail[3],
                           tail=tail, tail_from=self.tail_from)

    def per_list_chooser(self, op: str, dtype: str | None = None):
        """``choose(n_lists, n_elements, content_bytes, longest=None, n_long=None)``: the
        per-list
        kernel that reduces these lists in place of the strategy's flattened passes (the
        short-list kernel below the threshold, per_thread below ``short_from`` bytes where
        that is per_thread_staged, the long-list kernel above it unless that is ``flat``;
        ``longest``, the longest list where known, moves per_thread_staged's threshold or, for a long tail,
        sends every input to the long-list kernel; ``n_long``, the long lists where
        counted, can say that a tail is few; ``PerListRule``), or None for the
        flattened passes. The rule is looked up once (a reducer takes it at creation, so
        that a call only compares sizes: the call floor)."""
        if not self.strategy.flatten:
            return lambda n_lists, n_elements, content_bytes, longest=None, n_long=None: None
        rule = self.per_list_rule(op, dtype)
        below, short, long, short_from = rule.below, rule.short, rule.long, rule.short_from
        staged_from, staged_below, bounded = rule.staged_from, rule.staged_below, rule.bounded
        factor, floor = rule.tail_factor, rule.tail_floor
        few, few_staged = rule.tail_few, rule.tail_few_staged  # by the kernel that would run
        tail, tail_from = rule.tail or long, rule.tail_from

        def choose(n_lists, n_elements, content_bytes, longest=None, n_long=None):
            if n_lists <= 0:
                return None
            big = content_bytes >= short_from
            if longest is None:  # the mean alone
                if n_elements < below * n_lists:
                    return short if big else "per_thread"
            elif (longest * n_lists <= max(factor * n_elements, floor * n_lists)
                  or (n_long is not None and n_long * longest <= n_elements * (
                      few_staged if big and short == "per_thread_staged" else few))):
                if n_elements < (bounded if big else below) * n_lists:
                    return short if big else "per_thread"
            else:  # a long tail: one thread (or lane, staged) per list would wait on it
                if tail_from and (n_long is None or n_long < tail_from * n_lists):
                    return long
                return tail
            if staged_from * n_lists <= n_elements < staged_below * n_lists:
                return "per_wave_staged"
            return long
        return choose

    def per_list_role(self, op: str, n_lists: int, n_elements: int,
                      dtype: str | None = None, longest: int | None = None,
                      n_long: int | None = None) -> str | None:
        """``per_list_chooser``'s answer for these lists (without a dtype: no size bound;
        ``longest``: the longest list, ``n_long`` the long lists, where known)."""
        content_bytes = n_elements * np.dtype(dtype).itemsize if dtype is not None else math.inf
        return self.per_list_chooser(op, dtype)(n_lists, n_elements, content_bytes, longest,
                                                n_long)

    def uses_per_list_unit(self, op: str) -> bool:
        """Whether some input of ``op`` may run a per-list kernel (the naive unit's)."""
        return bool(self.strategy.flatten and (self.per_list(op, 1, 0)
                                               or self.long_list_kernel(op) != "flat"))

    def per_list_plan(self) -> "Plan":
        """This plan with the naive unit's strategy (where the per-list kernels live)."""
        return replace(self, strategy=STRATEGIES["naive"])

    def launch_of(self, role: str, op: str | None = None) -> Launch:
        """The launch configuration of ``role`` (``"role:op"`` rows override per op)."""
        if op is not None and f"{role}:{op}" in self.launch:
            return self.launch[f"{role}:{op}"]
        config = self.launch.get(role)
        # one shared default: building one per call cost about 3 us per family launch
        return DEFAULT_LAUNCH if config is None else config

    @property
    def content_role(self) -> str:
        """The pass that reads the content; its launch configuration is compiled into
        every kernel of the unit (block size, items per thread)."""
        st = self.strategy
        return st.passes[1] if st.name == "split" else st.passes[0]

@dataclass(frozen=True, eq=False)
class PlanRequest:
    """What a caller forces over the policy row (tests and benchmarks run one kernel on
    every input this way; ``GPUBackend(plan=PlanRequest(...))``). Every field left None
    keeps the row's choice:

    ``strategy`` split | fused | naive; ``launch`` role -> Launch fields, or the text
    ``"block=512,item_bytes=32"`` / ``"per_wave:block=64;flat_fixup:block=128"``;
    ``short_lists`` one mean-length threshold or a table like the row's (0: always the
    flattened passes, the families' windows cleared too); ``per_list_kernel`` one of
    PER_LIST_KERNELS for every op and size; ``long_list_kernel`` flat | per_wave;
    ``family_per_list`` the families' windows; ``per_wave_staged_lists`` a ``(from, below)`` band,
    a table of them, or ``()`` (never); ``few_long`` the share of the elements up to which
    counted long lists are no long tail; ``tail_lists`` the kernel of a long tail (one of
    TAIL_KERNELS, or a table)."""

    strategy: str | None = None
    launch: dict | str | None = None
    short_lists: float | dict | None = None
    per_list_kernel: str | None = None
    long_list_kernel: str | None = None
    family_per_list: dict | None = None
    per_wave_staged_lists: dict | tuple | None = None
    few_long: float | None = None
    tail_lists: dict | str | None = None


def plan_for(arch: str, request: PlanRequest | None = None, **fields) -> Plan:
    """The plan of ``arch``: its policy row with ``request`` (or ``PlanRequest(**fields)``)
    forced over it."""
    rq = request if request is not None else PlanRequest(**fields)
    row = arch_row(arch)
    name = rq.strategy or row.strategy
    if name not in STRATEGIES:
        raise ValueError(f"unknown GPU strategy {name!r}; known: {', '.join(STRATEGIES)}")
    chosen = rq.per_list_kernel
    return Plan(arch, row.vendor, row.wave, STRATEGIES[name], _launches(row, rq.launch),
                _thresholds(row, rq.short_lists),
                _kernel_choice(row.per_list_kernels, chosen, PER_LIST_KERNELS, "per-list"),
                _kernel_choice(row.long_list_kernels, rq.long_list_kernel, LONG_LIST_KERNELS,
                               "long-list"),
                _windows(row, rq), 0 if chosen else row.per_thread_staged_from_bytes,
                _staged(row, rq.per_wave_staged_lists),
                # a threshold override holds for every kernel
                dict(row.per_thread_staged_lists) if rq.short_lists is None else {},
                row.tail if rq.few_long is None else (*row.tail[:2], float(rq.few_long),
                                                      float(rq.few_long)),
                *_tails(row, rq.tail_lists, chosen))


def _launches(row: ArchRow, launch: dict | str | None) -> dict:
    configs = dict(row.launch)
    if isinstance(launch, str):
        launch = _parse_launch(launch)
    for role, fields in (launch or {}).items():
        configs[role] = replace(configs.get(role, Launch()), **fields)
    return configs


def _thresholds(row: ArchRow, short_lists: float | dict | None) -> dict:
    if short_lists is None:
        return dict(row.short_lists)
    if isinstance(short_lists, dict):  # a table of them like the row's
        return {k: float(v) for k, v in short_lists.items()}
    return {"*": float(short_lists)}


def _staged(row: ArchRow, per_wave_staged_lists: dict | tuple | None) -> dict:
    if per_wave_staged_lists is None:
        return dict(row.per_wave_staged_lists)
    if isinstance(per_wave_staged_lists, dict):
        return dict(per_wave_staged_lists)
    return {"*": tuple(per_wave_staged_lists)} if per_wave_staged_lists else {}  # () : never


def _windows(row: ArchRow, rq: PlanRequest) -> dict:
    windows = dict(row.family_per_list)
    short = rq.short_lists
    if short is not None and not isinstance(short, dict) and float(short) == 0:
        windows = {}  # always flattened
    if rq.family_per_list is not None:
        windows = dict(rq.family_per_list)
    return {f: (w if isinstance(w, tuple) else (w,)) for f, w in windows.items()}


def _tails(row: ArchRow, tail_lists: dict | str | None, chosen: str | None) -> tuple:
    """(kernel table of long tails, share of long lists from which it runs): a streaming
    kernel the caller names runs on long tails too, one named for tails on every tail."""
    tail_from = 0.0
    if tail_lists is None and chosen in TAIL_KERNELS:
        tails = {"*": chosen}
    elif tail_lists is None:
        tails, tail_from = dict(row.tail_lists), row.tail_from
    else:
        tails = {"*": tail_lists} if isinstance(tail_lists, str) else dict(tail_lists)
    for kernel in tails.values():
        if kernel not in TAIL_KERNELS:
            raise ValueError(f"unknown long-tail kernel {kernel!r}; known: "
                             f"{', '.join(TAIL_KERNELS)}")
    return tails, tail_from


def _per_op(table: dict, op: str, default, dtype: str | None = None):
    """``table``'s entry for ``"op:dtype"``, else for ``op``, else its ``"*"`` entry, else
    ``default``."""
    if dtype is not None and f"{op}:{dtype}" in table:
        return table[f"{op}:{dtype}"]
    return table.get(op, table.get("*", default))


def _kernel_choice(row_table: dict, chosen: str | None, known: tuple, what: str) -> dict:
    """op -> kernel: the one ``chosen`` for every op, else the table row's; every name
    checked against ``known``."""
    table = dict(row_table) if not chosen else {"*": chosen}
    for kernel in table.values():
        if kernel not in known:
            raise ValueError(f"unknown {what} kernel {kernel!r}; known: {', '.join(known)}")
    return table
