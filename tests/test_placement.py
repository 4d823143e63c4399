"""The placement policy (gpuexec.scheduler.placement): pure Python, no Dask."""

import json
import math

import pytest
from coffea.processor.executor import WorkItem

from gpuexec.scheduler.calibration import Calibration, Fit
from gpuexec.scheduler.cluster import WorkerPool
from gpuexec.scheduler.placement import (
    Chunk,
    CostModel,
    Placement,
    Pool,
    Reason,
    crossover_events,
    merge_for_gpu,
)
from placement_sim import simulate

# a CPU slot: 1 ms + 5 us/event; a GPU: 20 ms launch/transfer floor + 0.2 us/event
CPU_FIXED, CPU_RATE = 1e-3, 2e5
GPU_FIXED, GPU_RATE = 20e-3, 5e6


def pools(cpu_slots=4, gpu_slots=1, gpu_fixed=GPU_FIXED, gpu_rate=GPU_RATE):
    out = []
    if cpu_slots:
        out.append(Pool("cpu", "cpu", cpu_slots, CostModel(CPU_FIXED, CPU_RATE)))
    if gpu_slots:
        out.append(Pool("gpu", "gpu", gpu_slots, CostModel(gpu_fixed, gpu_rate)))
    return out


def chunk(i, events, file="f.root", start=0):
    return Chunk(i, file, start, start + events, "Events", "ds")


def test_crossover_is_where_the_lines_meet():
    expected = (GPU_FIXED - CPU_FIXED) / (1 / CPU_RATE - 1 / GPU_RATE)
    policy = Placement(pools())
    assert policy.crossover() == pytest.approx(expected)
    assert crossover_events((1.0, 1e-6), (0.0, 2e-6)) == pytest.approx(1e6)
    assert crossover_events((0.0, 1e-6), (1.0, 2e-6)) == 0.0  # GPU never slower
    assert math.isinf(crossover_events((1.0, 2e-6), (0.0, 1e-6)))  # GPU never faster


def test_big_chunks_go_to_gpu_small_ones_to_cpu_with_a_fast_gpu():
    cross = Placement(pools()).crossover()
    for events in (100, 1_000, int(cross) - 1):
        choice = Placement(pools()).choose(chunk(0, events), now=0)
        assert choice == ("cpu", Reason.BELOW_CROSSOVER, ""), events
    for events in (int(cross) + 1, 100_000, 2_000_000):
        choice = Placement(pools()).choose(chunk(0, events), now=0)
        assert choice == ("gpu", Reason.GPU_EARLIER, "above crossover"), events


def test_above_crossover_a_busy_gpu_loses_to_an_idle_cpu():
    policy = Placement(pools())
    # queue 2 s of work on the GPU: a 100k chunk then finishes earlier on a CPU slot
    for i in range(100):
        policy._slots["gpu"][0].outstanding[-1 - i] = 0.02
    choice = policy.choose(chunk(0, 100_000), now=0)
    assert choice == ("cpu", Reason.CPU_EARLIER, "above crossover")


def test_without_a_gpu_pool_everything_goes_to_cpu():
    policy = Placement(pools(gpu_slots=0) + [Pool("cpub", "cpu", 2, CostModel(CPU_FIXED, CPU_RATE))])
    sizes = [10, 1_000, 100_000, 10_000_000] * 5
    assert set(policy.place([chunk(i, n) for i, n in enumerate(sizes)], now=0)) <= {"cpu", "cpub"}
    assert math.isinf(policy.crossover())
    assert policy.summary()["crossover"] is None


def test_without_a_cpu_pool_everything_goes_to_gpu():
    policy = Placement(pools(cpu_slots=0, gpu_slots=2))
    sizes = [1, 10, 1_000, 100_000]
    assert policy.place([chunk(i, n) for i, n in enumerate(sizes)], now=0) == ["gpu"] * 4
    assert policy.crossover() == 0.0
    assert {d["reason"] for d in policy.decisions()} == {Reason.ONLY_POOL.value}


def test_equal_chunks_are_spread_so_both_pools_finish_together():
    policy = Placement(pools())
    placed = policy.place([chunk(i, 100_000, start=100_000 * i) for i in range(100)], now=0)
    assert 0 < placed.count("cpu") < placed.count("gpu")
    last = {p: max(d["predicted_finish"] for d in policy.decisions() if d["pool"] == p)
            for p in ("cpu", "gpu")}
    cpu_chunk = CPU_FIXED + 100_000 / CPU_RATE
    assert abs(last["cpu"] - last["gpu"]) <= cpu_chunk


def test_decisions_shift_to_cpu_when_the_gpu_is_slowed():
    policy = Placement(pools())
    first = [chunk(i, 100_000, start=100_000 * i) for i in range(16)]
    placed = policy.place(first, now=0)
    assert "gpu" in placed and "cpu" in placed
    before = Placement(pools()).choose(chunk(99, 1_000_000), now=0)[0]
    assert before == "gpu"
    t = 0.0
    for c, pool in zip(first, placed):  # the GPU runs 50x slower than calibrated
        calibrated = policy.pools[pool].model.seed_seconds(c.events)
        seconds = calibrated * (50 if pool == "gpu" else 1)
        t += seconds
        policy.observe(c.id, seconds, now=t)
    assert math.isinf(policy.crossover())  # 50x: slower per event than a CPU slot
    for i, events in enumerate((100_000, 1_000_000, 5_000_000)):
        choice = policy.choose(chunk(100 + i, events), now=t)
        assert choice == ("cpu", Reason.BELOW_CROSSOVER, "")
    done = [d for d in policy.decisions() if d["actual_seconds"] is not None]
    assert len(done) == 16 and all(d["finished_at"] is not None for d in done)


def test_online_refinement_in_simulation_follows_a_slow_gpu():
    truth = pools(gpu_fixed=0.4, gpu_rate=1e5)  # the real GPU pool: 20x slower floor, 50x per event
    chunks = [100_000] * 100
    best = min(simulate(chunks, "all-cpu", truth).makespan, simulate(chunks, "all-gpu", truth).makespan)
    policy = Placement(pools())  # calibrated as a fast GPU
    run = simulate(chunks, policy, truth, window=10)
    assert run.makespan <= 1.10 * best
    assert run.pools["cpu"]["chunks"] > 80
    assert sum(v["chunks"] for v in run.pools.values()) == 100
    assert sum(v["events"] for v in run.pools.values()) == 100 * 100_000


def test_placement_beats_all_cpu_and_all_gpu_when_both_pools_help():
    truth = pools()
    chunks = [100_000] * 100
    all_cpu = simulate(chunks, "all-cpu", truth)
    all_gpu = simulate(chunks, "all-gpu", truth)
    for window in (None, 10):
        run = simulate(chunks, Placement(pools()), truth, window=window)
        assert run.makespan < min(all_cpu.makespan, all_gpu.makespan), window
    assert all_cpu.assignments == ["cpu"] * 100 and all_gpu.assignments == ["gpu"] * 100
    with pytest.raises(ValueError, match="no GPU pool"):
        simulate(chunks, "all-gpu", pools(gpu_slots=0))


def test_a_pool_never_measured_is_probed_once_times_come_in():
    policy = Placement(pools())
    c0 = chunk(0, 100_000)
    assert policy.assign(c0, now=0) == "gpu"
    policy.observe(0, 0.04, now=0.04)
    pool, reason, _detail = policy.choose(chunk(1, 100_000), now=0.04)
    assert (pool, reason) == ("cpu", Reason.UNMEASURED)
    quiet = Placement(pools(), explore=False)
    quiet.assign(c0, now=0)
    quiet.observe(0, 0.04, now=0.04)
    assert quiet.choose(chunk(1, 100_000), now=0.04)[0] == "gpu"


def test_probe_gives_each_pool_its_first_chunks():
    policy = Placement(pools(), probe=1)
    assert policy.place([chunk(0, 10), chunk(1, 10), chunk(2, 10)], now=0) == ["cpu", "gpu", "cpu"]


def test_cost_model_learns_fixed_and_per_event_cost_from_several_sizes():
    model = CostModel(0.0, 1e6)  # calibrated far off
    for _ in range(10):
        for n in (10_000, 100_000, 1_000_000):
            model.observe(n, 0.05 + n / 2e5)
    fixed, per_event = model.params()
    assert fixed == pytest.approx(0.05, rel=0.05)
    assert per_event == pytest.approx(1 / 2e5, rel=0.05)


def test_cost_model_with_equal_chunks_scales_the_calibrated_shape():
    model = CostModel(0.01, 1e6, ref_events=100_000)
    for _ in range(20):
        model.observe(100_000, 3 * model.seed_seconds(100_000))
    assert model.seconds(100_000) == pytest.approx(3 * model.seed_seconds(100_000), rel=0.02)
    assert model.seconds(1_000_000) == pytest.approx(3 * model.seed_seconds(1_000_000), rel=0.05)
    assert model.own_scale == pytest.approx(3, rel=1e-6)


def test_unmeasured_pool_is_predicted_with_the_measured_scale():
    policy = Placement(pools(), explore=False)
    policy.assign(chunk(0, 100_000), now=0)
    seed = policy.pools["gpu"].model.seed_seconds(100_000)
    policy.observe(0, 10 * seed, now=1)
    cpu_seed = policy.pools["cpu"].model.seed_seconds(100_000)
    assert policy.predict("cpu", 100_000) == pytest.approx(10 * cpu_seed, rel=1e-6)


def test_decisions_are_plain_records_with_actual_times():
    policy = Placement(pools())
    items = [WorkItem("ds", "/data/a.root", "Events", 100 * i, 100 * (i + 1), "uuid-a") for i in range(4)]
    placed = policy.place(items, now=0)
    assert placed == ["cpu"] * 4
    records = policy.decisions()
    json.dumps(records)
    first = records[0]
    assert (first["chunk"], first["file"], first["entrystart"], first["entrystop"], first["events"]) == \
        (0, "/data/a.root", 0, 100, 100)
    assert first["predicted_seconds"] > 0 and first["actual_seconds"] is None
    assert first["predicted_finish"] == pytest.approx(first["predicted_start"] + first["predicted_seconds"])
    task = policy.mark_merged([1, 2])
    policy.observe([1, 2], 0.3, now=1.0)
    by_id = {d["chunk"]: d for d in policy.decisions()}
    assert by_id[1]["task"] == by_id[2]["task"] == task
    assert by_id[1]["actual_seconds"] == pytest.approx(0.15)
    summary = policy.summary()
    assert summary["pools"]["cpu"]["chunks"] == 4 and summary["pools"]["cpu"]["events"] == 400
    assert summary["pools"]["cpu"]["actual_seconds"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="already assigned"):
        policy.assign(Chunk(0, "x", 0, 1), now=0)


def test_observe_of_chunks_from_different_pools_is_refused():
    policy = Placement(pools(), probe=1)
    policy.place([chunk(0, 10), chunk(1, 10)], now=0)
    with pytest.raises(ValueError, match="different pools"):
        policy.observe([0, 1], 1.0)


def test_retry_on_cpu_keeps_one_record_and_says_where_it_failed():
    policy = Placement(pools())
    assert policy.assign(chunk(0, 1_000_000), now=0) == "gpu"
    policy.retry(0, "cpu", now=0.5)
    (record,) = policy.decisions()
    assert record["pool"] == "cpu" and record["retried_from"] == "gpu"
    assert (record["reason"], record["detail"]) == (Reason.RETRY.value, "after a failure")
    assert not policy._slots["gpu"][0].outstanding


def test_from_worker_pools_and_a_calibration():
    cpu = WorkerPool.cpu(3, threads=2)
    gpu = WorkerPool("gpu", 1, threads=2, resources={"GPU": 1, "CPU": 2},
                     task_resources={"GPU": 1}, backend="cuda")
    cal = Calibration(key="k", gpuexec_version="0", created="now", host="h", cpu="c",
                      gpu={"vendor": "nvidia", "name": "H200", "arch": "sm_90"},
                      gpu_backend="cuda", sizes=[1, 2], repeats=1, ops=["sum"],
                      fits={"cpu": Fit(1e-4, 1e-7), "cuda": Fit(5e-4, 1e-9), "transfer": Fit(1e-5, 4e-9)})
    policy = Placement.from_pools([cpu, gpu, WorkerPool.cpu(0)], cal)
    assert {n: (p.kind, p.slots) for n, p in policy.pools.items()} == {"cpu": ("cpu", 6), "gpu": ("gpu", 1)}
    assert policy.pools["gpu"].model.seed_fixed == pytest.approx(5.1e-4)
    assert policy.pools["gpu"].model.seed_throughput == pytest.approx(1 / 5e-9)
    assert policy.crossover() == pytest.approx(cal.crossover)
    # no calibration: neutral seeds, so no size preference, load decides
    neutral = Placement.from_pools([cpu, gpu], None)
    assert neutral.crossover() == 0.0
    # a GPU pool on the CPU backend (tests without a GPU) is seeded like the CPU pool
    on_cpu = WorkerPool("gpu", 1, resources={"GPU": 1}, task_resources={"GPU": 1}, backend="cpu")
    assert Placement.from_pools([cpu, on_cpu], cal).crossover() == 0.0


def _items():
    a = [WorkItem("ds", "a.root", "Events", 100 * i, 100 * (i + 1), "ua") for i in range(4)]
    b = [WorkItem("ds", "b.root", "Events", 100 * i, 100 * (i + 1), "ub") for i in range(2)]
    gap = WorkItem("ds", "a.root", "Events", 500, 600, "ua")
    other_tree = WorkItem("ds", "a.root", "Other", 400, 500, "ua")
    return [a[0], b[0], a[1], a[2], b[1], a[3], gap, other_tree]


def test_merge_for_gpu_merges_contiguous_ranges_of_one_file():
    items = _items()
    result = merge_for_gpu(items, target_events=250)
    ranges = [(i.filename, i.treename, i.entrystart, i.entrystop) for i in result.items]
    assert ranges == [("a.root", "Events", 0, 200), ("b.root", "Events", 0, 200),
                      ("a.root", "Events", 200, 400), ("a.root", "Events", 500, 600),
                      ("a.root", "Other", 400, 500)]
    assert result.parts == [(0, 2), (1, 4), (3, 5), (6,), (7,)]
    assert sorted(i for p in result.parts for i in p) == list(range(len(items)))
    assert sum(len(i) for i in result.items) == sum(len(i) for i in items)
    assert all(isinstance(i, WorkItem) and i.fileuuid in ("ua", "ub") for i in result.items)
    assert [m.events for m in result.merges] == [200, 200, 200]
    assert result.describe()[0] == ("merged 2 chunks of a.root (tree 'Events') into one GPU task, "
                                    "entries [0, 200)")
    json.dumps([m.as_dict() for m in result.merges])


def test_merge_for_gpu_respects_the_target_and_other_files():
    items = _items()
    assert merge_for_gpu(items, target_events=50).merges == []
    whole = merge_for_gpu(items, target_events=10_000)
    assert [(i.filename, i.entrystart, i.entrystop) for i in whole.items][:2] == \
        [("a.root", 0, 400), ("b.root", 0, 200)]
    # same file, different uuid: not the same file
    other = WorkItem("ds", "a.root", "Events", 400, 500, "changed")
    assert len(merge_for_gpu(items[:6] + [other], 10_000).items) == 3
    chunks = [Chunk(0, "x", 0, 10), Chunk(1, "y", 10, 20), Chunk(2, "x", 10, 20)]
    merged = merge_for_gpu(chunks, 100)
    assert [(c.file, c.start, c.stop) for c in merged.items] == [("x", 0, 20), ("y", 10, 20)]
    with pytest.raises(ValueError):
        merge_for_gpu(items, 0)


def test_an_unmeasured_pool_queues_at_most_one_chunk_per_slot():
    """Seeds that make the GPU look 25x faster would queue most of a window on it before
    its first result; with ``unmeasured_depth=1`` it takes one chunk per slot while the
    CPU pool has room, then (nothing measured, all full) chunks go by slot count; once
    the GPU reports it is placed by its model again. 14 CPU + 2 GPU slots and a window
    of 32 chunks, as on the 16-core H200 host."""
    def window(policy):
        return [policy.assign(chunk(i, 200_000, start=200_000 * i), now=0,
                              backlog_events=200_000 * (31 - i)) for i in range(32)]

    policy = Placement(pools(cpu_slots=14, gpu_slots=2), unmeasured_depth=1)
    placed = window(policy)
    assert placed[:16].count("gpu") == 2  # one per slot while the CPU pool had room
    assert placed.count("gpu") == 32 * 2 // 16  # then by slots
    assert window(Placement(pools(cpu_slots=14, gpu_slots=2))).count("gpu") == 32  # seeds alone
    policy.observe([placed.index("gpu")], 0.06, now=0.06)  # measured as the model predicted
    assert policy.assign(chunk(32, 200_000, start=200_000 * 32), now=0.06) == "gpu"
    with pytest.raises(ValueError):
        Placement(pools(), unmeasured_depth=0)


def test_an_unmeasured_merging_pool_gets_one_task_per_slot():
    """12 single-slot GPU workers whose tasks merge 4 chunks, 4 CPU slots (the H200 host
    with MPS): before any result the GPU pool takes one *task* (4 chunks) per slot, so
    every GPU worker starts at once. Counted in chunks, it took 12 chunks = 3 tasks and
    the H200 runs started with 6-7 of 12 GPU workers busy for their first fifth."""
    policy = Placement([Pool("cpu", "cpu", 4, CostModel(CPU_FIXED, CPU_RATE)),
                        Pool("gpu", "gpu", 12, CostModel(GPU_FIXED, GPU_RATE), merge=4)],
                       unmeasured_depth=1)
    placed = [policy.assign(chunk(i, 200_000, start=200_000 * i), now=0,
                            backlog_events=200_000 * (99 - i)) for i in range(52)]
    assert placed[:48].count("gpu") == 48  # seeds favour the GPU: 12 tasks of 4
    assert placed[48:52] == ["cpu"] * 4  # then the other pool fills its slots


def test_merged_gpu_tasks_share_their_fixed_cost_in_the_placement():
    """The H200 case (ADL Q8, 6 GPU workers x 2 slots, 4 CPU workers, 100 chunks of 50k):
    GPU tasks of 4 merged chunks cost 0.45 s + 1.3 us/event, a CPU chunk 0.19 s. Charged a
    whole task's fixed cost per chunk, the GPU looked slower and got 24 of 100 chunks (as
    measured: 1.2M of 5M events, makespan 1.8x all-GPU); shared, the placement beats both
    single placements."""
    def truth():
        return [Pool("cpu", "cpu", 4, CostModel(0.006, 268_000)),
                Pool("gpu", "gpu", 12, CostModel(0.45, 770_000), merge=4)]

    def policy(merge):  # seeds off by orders of magnitude, as a kernel calibration is
        return Placement([Pool("cpu", "cpu", 4, CostModel(0.0005, 3.1e6)),
                          Pool("gpu", "gpu", 12, CostModel(0.002, 1.5e8), merge=merge)],
                         unmeasured_depth=1)

    chunks = [50_000] * 100
    best = min(simulate(chunks, "all-cpu", truth()).makespan,
               simulate(chunks, "all-gpu", truth()).makespan)
    unaware = simulate(chunks, policy(1), truth(), window=32)
    shared = simulate(chunks, policy(4), truth(), window=32)
    # unaware, the GPU pool looks slower per chunk than a CPU slot and gets only what its
    # idle slots can finish before the run's end (24 chunks and 1.7x best before that rule)
    assert unaware.makespan > 1.15 * best and unaware.makespan > 1.15 * shared.makespan
    assert shared.makespan < best
    assert sum(v["events"] for v in shared.pools.values()) == 100 * 50_000


def test_chunks_of_one_merged_task_queue_on_one_slot():
    policy = Placement([Pool("gpu", "gpu", 4, CostModel(0.4, 1e6), merge=4),
                        Pool("cpu", "cpu", 1, CostModel(1.0, 1e3))])
    slots = []
    for i in range(6):
        policy.assign(chunk(i, 1000, start=1000 * i), now=0.0)
        slots.append(policy.decisions()[-1]["slot"])
        if i == 4:
            policy.end_batch()  # submitted: the next chunk starts another task
    assert slots[:4] == [slots[0]] * 4 and slots[4] != slots[0] and slots[5] not in (slots[0], slots[4])
    first = policy.decisions()[0]
    assert first["predicted_seconds"] == pytest.approx(0.1 + 1000 / 1e6)


def test_an_idle_gpu_pool_slower_per_chunk_still_takes_chunks_that_shorten_the_run():
    """Below the crossover (the GPU pool slower per chunk than a CPU slot) chunks go to the
    CPU pool, but a GPU slot that is idle takes one when it finishes it before the
    run's predicted end: its cores would otherwise sit idle (ADL Q8 on the H200 host with
    the default pools: a GPU chunk 0.5 s, a CPU chunk 0.2 s)."""
    def truth():
        return [Pool("cpu", "cpu", 4, CostModel(0.0, 250_000)), Pool("gpu", "gpu", 2, CostModel(0.0, 100_000))]

    chunks = [50_000] * 100
    all_cpu = simulate(chunks, "all-cpu", truth()).makespan  # 100 x 0.2 s on 4 slots
    policy = Placement(truth(), unmeasured_depth=1)
    run = simulate(chunks, policy, truth(), window=12)
    assert math.isinf(policy.crossover())  # never faster per chunk
    helped = [d for d in policy.decisions() if d["pool"] == "gpu"
              and (d["reason"], d["detail"]) == (Reason.IDLE_SLOT.value, "below crossover")]
    assert helped and run.pools["gpu"]["chunks"] >= 10
    assert run.makespan < 0.95 * all_cpu
    assert sum(v["events"] for v in run.pools.values()) == 100 * 50_000


def test_a_chunk_waits_while_its_pool_is_at_its_depth():
    """``depth``: a pool holds at most depth x slots (x merge) chunks not yet observed;
    a chunk whose chosen pool is full is not assigned (late binding) when the caller can
    hold it back, and is assigned as before when it cannot."""
    policy = Placement([Pool("gpu", "gpu", 2, CostModel(0.0, 1e7), merge=2),
                        Pool("cpu", "cpu", 1, CostModel(0.0, 1e3))], depth=1.0, explore=False)
    assert policy.capacity("gpu") == 4 and policy.capacity("cpu") == 1
    assert Placement(pools()).capacity("gpu") == math.inf
    placed = [policy.assign(chunk(i, 1000, start=1000 * i), now=0.0, may_wait=True)
              for i in range(4)]
    assert placed == ["gpu"] * 4
    waiting = chunk(4, 1000, start=4000)
    assert policy.assign(waiting, now=0.0, may_wait=True) is None
    assert len(policy.decisions()) == 4  # nothing recorded for the waiting chunk
    policy.observe([0, 1], 0.0002, now=0.0002)  # a task of two chunks completed
    assert policy.assign(waiting, now=0.0002, may_wait=True) == "gpu"
    # a task that completed without a run of its own frees its chunks' places too
    policy.release([2, 3])
    assert policy.assign(chunk(5, 1000, start=5000), now=0.0003, may_wait=True) == "gpu"
    assert policy.decisions()[2]["finished_at"] is not None
    # without may_wait the depth does not apply (e.g. retries, place())
    for i in range(6, 9):
        assert policy.assign(chunk(i, 1000, start=1000 * i), now=0.0003) == "gpu"
    with pytest.raises(ValueError):
        Placement(pools(), depth=0)


def test_a_simulated_run_with_a_depth_holds_chunks_back_and_loses_none():
    def truth():
        return [Pool("cpu", "cpu", 4, CostModel(0.0, 50_000 / 0.22)),
                Pool("gpu", "gpu", 6, CostModel(0.2, 200_000 / 0.3), merge=4)]

    chunks = [50_000] * 100
    policy = Placement(truth(), unmeasured_depth=1, depth=1.0)
    seen = []
    assign = policy.assign

    def watched(*args, **kwargs):  # the most chunks a pool ever held at once
        pool = assign(*args, **kwargs)
        seen.append(max(policy._queued(p) / policy.capacity(p) for p in policy.pools))
        return pool

    policy.assign = watched
    run = simulate(chunks, policy, truth(), window=56)
    assert max(seen) <= 1.0
    assert sum(v["events"] for v in run.pools.values()) == 100 * 50_000
    assert len(policy.decisions()) == 100


# ------------------------------------------------------------------- backup copies
def test_a_straggler_is_copied_to_an_idle_pool_and_the_first_copy_counts():
    """Once nothing waits, a task predicted to end well after a copy on another pool's
    idle slot would is copied there; the copy that completes first counts, and the other
    keeps its slot until its predicted end (a running task cannot be stopped)."""
    policy = Placement([Pool("cpu", "cpu", 2, CostModel(0.0, 1e5)),
                        Pool("gpu", "gpu", 1, CostModel(0.01, 1e6))],
                       probe=2, explore=False, backup_margin=0.5)
    sizes = [50_000, 500_000, 50_000, 50_000]
    start = 0
    for i, n in enumerate(sizes):  # probe: chunks 0, 1 on the CPU, 2, 3 on the GPU
        policy.assign(chunk(i, n, start=start), now=0.0)
        start += n
    assert [d["pool"] for d in policy.decisions()] == ["cpu", "cpu", "gpu", "gpu"]
    policy.started([0], now=0.0)
    policy.started([1], now=0.0)
    policy.started([2], now=0.0)
    assert policy.backups(now=0.0) == []  # no idle slot anywhere
    policy.observe(2, 0.06, now=0.06)
    policy.started([3], now=0.06)
    policy.observe(3, 0.06, now=0.12)
    policy.observe(0, 0.5, now=0.5)
    # chunk 1 (5 s on a CPU slot) against a copy of 0.51 s on the idle GPU
    (backup,) = policy.backups(now=0.5)
    assert (backup.chunks, backup.from_pool, backup.pool) == ((1,), "cpu", "gpu")
    assert backup.original_finish == pytest.approx(5.0)
    assert backup.copy_finish == pytest.approx(0.5 + 0.01 + 0.5, rel=0.05)
    assert policy.backups(now=0.6) == []  # copied once; the GPU slot holds the copy
    with pytest.raises(ValueError):
        policy.observe(1, 0.4, now=0.9, pool="elsewhere")
    policy.observe(1, 0.4, now=0.9, pool="gpu")
    policy.settle(1, "gpu", now=0.9)
    record = policy.decisions()[1]
    assert record["pool"] == "cpu" and record["backup_pool"] == "gpu"
    assert record["taken_from"] == "gpu" and record["actual_seconds"] == 0.4
    # the cancelled original still runs: its CPU slot is busy until its predicted end,
    # or until it is reported to have ended; its time still teaches the CPU model
    cpu_slot = policy._slots["cpu"][1]
    assert not cpu_slot.idle(1.0) and cpu_slot.anchor == pytest.approx(5.0)
    seen = policy.pools["cpu"].model.observations
    policy.lost(1, 4.5, now=4.5)
    assert cpu_slot.idle(4.5) and policy.pools["cpu"].model.observations == seen + 1
    summary = policy.summary()["pools"]
    assert summary["gpu"]["backups"] == 1 and summary["gpu"]["backups_taken"] == 1
    # late reports on chunks placed anew (a retry drops their copies) are ignored
    policy.retry(1, "cpu", now=5.0)
    policy.lost(1, 0.5, now=5.1, pool="gpu")
    policy.started(1, now=5.1, pool="gpu")
    policy.started(99, now=5.1)
    assert policy.decisions()[1]["backup_pool"] is None


def test_a_slot_occupied_from_outside_the_run_takes_chunks_only_when_free():
    """A worker still running a copy that an earlier run cancelled: its slot is busy
    until then, so chunks go to the other slots first, and a pool whose every slot is
    busy is not explored (the chunk would wait there)."""
    def cpu_gpu():
        return [Pool("cpu", "cpu", 2, CostModel(0.0, 1e5)),
                Pool("gpu", "gpu", 1, CostModel(0.01, 1e6))]

    policy = Placement(cpu_gpu(), crossover=1e12, clock=lambda: 0.0)  # all below crossover
    policy.occupied("cpu", 3.0)
    assert [policy.assign(chunk(i, 50_000, start=50_000 * i), now=0.0)
            for i in range(2)] == ["cpu", "cpu"]
    # both on the free slot (0.5 s each), none on the one busy until 3 s
    busy = [i for i, s in enumerate(policy._slots["cpu"]) if s.anchor == 3.0]
    assert len(busy) == 1 and not policy._slots["cpu"][busy[0]].outstanding
    assert {d["slot"] for d in policy.decisions()} == {1 - busy[0]}
    assert policy.decisions()[1]["predicted_start"] == pytest.approx(0.5)

    # a chunk whose pool's earliest slot is held waits while another pool has work in
    # flight (whose completion places it anew); with nothing in flight elsewhere it binds
    # (here the GPU pool takes 10 s a chunk: it cannot finish first)
    def held_cpu_slow_gpu():
        policy = Placement([Pool("cpu", "cpu", 2, CostModel(0.0, 1e5)),
                            Pool("gpu", "gpu", 1, CostModel(10.0, 1e6))],
                           crossover=1e12, clock=lambda: 0.0)
        policy.occupied("cpu", 3.0)
        policy.occupied("cpu", 3.0)
        return policy

    policy = held_cpu_slow_gpu()
    assert policy.assign(chunk(0, 50_000), now=0.0, may_wait=True) == "cpu"  # nothing else
    policy = held_cpu_slow_gpu()
    policy._slots["gpu"][0].add(99, 1.0, 0.0)  # work in flight on the GPU pool
    assert policy.assign(chunk(0, 50_000), now=0.0, may_wait=True) is None
    assert policy.assign(chunk(0, 50_000), now=0.0) == "cpu"  # (may not wait: bound)
    # the last chunk (no backlog), below the crossover: with the CPU slots held until 3 s,
    # the slower GPU pool, idle, finishes it first (0.06 s against 3.5 s)
    policy = Placement(cpu_gpu(), crossover=1e12, clock=lambda: 0.0)
    policy.occupied("cpu", 3.0)
    policy.occupied("cpu", 3.0)
    assert policy.choose(chunk(0, 50_000), now=0.0) == (
        "gpu", Reason.SLOTS_HELD, "below crossover")

    def measured_gpu_only(occupied):
        policy = Placement([Pool("cpu", "cpu", 1, CostModel(0.0, 1e5)),
                            Pool("gpu", "gpu", 1, CostModel(0.01, 1e6))], crossover=0)
        assert policy.assign(chunk(0, 50_000), now=0.0) == "gpu"
        policy.observe(0, 0.06, now=0.06)
        if occupied:
            policy.occupied("cpu", 3.0)
        return policy, policy.choose(chunk(1, 50_000, start=50_000), now=0.06)

    assert measured_gpu_only(False)[1] == ("cpu", Reason.UNMEASURED, "above crossover")
    policy, choice = measured_gpu_only(True)
    assert choice[0] == "gpu"
    # its task's predicted seconds, for the next run to know when the worker frees
    assert policy.task_seconds([0], "gpu") == pytest.approx(0.06, rel=0.5)
    assert policy.task_seconds([0], "elsewhere") is None
    assert policy.task_seconds([7], "gpu") is None


def test_no_copy_unless_it_wins_by_the_margin():
    def run(margin, big):
        policy = Placement([Pool("cpu", "cpu", 2, CostModel(0.0, 1e5)),
                            Pool("gpu", "gpu", 1, CostModel(0.01, 1e6))],
                           probe=2, explore=False, backup_margin=margin)
        for i, n in enumerate([50_000, big, 50_000, 50_000]):
            policy.assign(chunk(i, n, start=1_000_000 * i), now=0.0)
            policy.started(i, now=0.0 if i < 3 else 0.06)
        for i, t in ((2, 0.06), (3, 0.12), (0, 0.5)):
            policy.observe(i, 0.06 if i > 0 else 0.5, now=t)
        return policy.backups(now=0.5)

    assert run(0.5, 500_000)
    assert run(None, 500_000) == []  # backups off
    assert run(20.0, 500_000) == []  # 4.5 s left against 0.51 s: not 21x
    # 0.1 s left on the CPU against a copy of 0.07 s: not 1.5x
    assert run(0.5, 60_000) == []
    assert run(0.25, 60_000)
    with pytest.raises(ValueError):
        Placement(pools(), backup_margin=-1)


def test_a_merged_gpu_task_is_copied_chunk_by_chunk_when_enough_cpu_slots_are_idle():
    policy = Placement([Pool("gpu", "gpu", 1, CostModel(0.0, 1e4), merge=2),
                        Pool("cpu", "cpu", 2, CostModel(0.0, 1e5))],
                       probe=4, explore=False, backup_margin=0.5)
    for i in range(7):  # probe: chunks 0-3 on the GPU, 4-6 on the CPU
        policy.assign(chunk(i, 10_000, start=10_000 * i), now=0.0)
        if i == 1:
            policy.end_batch()
    policy.mark_merged([0, 1])
    policy.mark_merged([2, 3])
    for ids, at in (([0, 1], 0.0), ([4], 0.0), ([5], 0.0), ([6], 0.1), ([2, 3], 2.0)):
        policy.started(ids, now=at)
    policy.observe([0, 1], 2.0, now=2.0)  # the GPU measured: its next task ends at 4 s
    policy.observe(4, 0.1, now=0.1)
    policy.observe(5, 0.1, now=0.1)
    busy = [s for s in policy._slots["cpu"] if s.outstanding]
    assert len(busy) == 1  # chunk 6 still queued on one CPU slot
    policy.observe(6, 0.1, now=0.2)
    (backup,) = policy.backups(now=2.0)
    assert backup.chunks == (2, 3) and backup.pool == "cpu"
    assert {policy.decisions()[i]["backup_pool"] for i in (2, 3)} == {"cpu"}
    # the first copy to finish takes the merged original off the GPU's queue; the other
    # chunk counts on its own copy
    policy.observe(2, 0.1, now=2.1, pool="cpu")
    policy.settle(2, "cpu", now=2.1)
    assert policy.decisions()[3]["taken_from"] is None
    assert not policy._slots["gpu"][0].outstanding
    assert not policy._slots["gpu"][0].idle(2.1)  # busy until the task's predicted end
    policy.observe(3, 0.1, now=2.1, pool="cpu")
    policy.settle(3, "cpu", now=2.1)
    assert [policy.decisions()[i]["taken_from"] for i in (2, 3)] == ["cpu", "cpu"]


def test_a_merged_task_is_not_copied_without_a_slot_for_each_chunk():
    policy = Placement([Pool("gpu", "gpu", 1, CostModel(0.0, 1e4), merge=2),
                        Pool("cpu", "cpu", 2, CostModel(0.0, 1e5))],
                       probe=4, explore=False, backup_margin=0.5)
    for i in range(7):
        policy.assign(chunk(i, 10_000, start=10_000 * i), now=0.0)
        if i == 1:
            policy.end_batch()
    policy.mark_merged([0, 1])
    policy.mark_merged([2, 3])
    policy.observe([0, 1], 2.0, now=2.0)
    policy.observe(4, 0.1, now=0.1)
    policy.observe(5, 0.1, now=0.1)
    assert policy.backups(now=2.0) == []  # one CPU slot idle, the task has two chunks


def test_copies_shorten_a_simulated_run_whose_slow_pool_drew_chunks_before_it_was_measured():
    """Unmeasured pools are bound by slot counts: the CPU pool (1 s a chunk) drew 8 of
    100 chunks before any time came in, and its second chunks would end at 2 s while the
    GPU pool is done at 0.6 s. Copied to idle GPU slots, they count from there; every
    chunk counts once."""
    def truth():
        return [Pool("cpu", "cpu", 4, CostModel(0.0, 50_000 / 1.0)),
                Pool("gpu", "gpu", 12, CostModel(0.05, 200_000 / 0.2), merge=4)]

    def seeds():
        return [Pool("cpu", "cpu", 4, CostModel(0.01, 1e6)),
                Pool("gpu", "gpu", 12, CostModel(0.01, 1e6), merge=4)]

    runs = {}
    for margin in (None, 0.5):
        policy = Placement(seeds(), unmeasured_depth=1, depth=2.0, backup_margin=margin)
        runs[margin] = (simulate([50_000] * 100, policy, truth()), policy.decisions())
    plain, copied = runs[None][0], runs[0.5][0]
    assert plain.makespan == pytest.approx(2.0)
    assert copied.makespan < 0.5 * plain.makespan  # 0.6 s here
    for run in (plain, copied):
        assert sum(p["events"] for p in run.pools.values()) == 100 * 50_000
        assert sum(p["chunks"] for p in run.pools.values()) == 100
    decisions = runs[0.5][1]
    assert all(d["taken_from"] in ("cpu", "gpu") for d in decisions)
    assert any(d["backup_pool"] == "gpu" and d["taken_from"] == "gpu" for d in decisions)
    assert not any(d["backup_pool"] for d in runs[None][1])
