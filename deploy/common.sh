# Shared by the Slurm job scripts in deploy/ (sourced, not run): start a Dask scheduler
# on the job's first node, the workers on every node, run the analysis, clean up.
#
# Expects: GPUEXEC_REPO (the gpuexec checkout), PYTHON (the environment's python),
# RUN_DIR (a directory on the shared filesystem, seen by every node).
# shellcheck shell=bash

: "${GPUEXEC_REPO:?set GPUEXEC_REPO to the gpuexec checkout}"
: "${PYTHON:?set PYTHON to the python of the environment with gpuexec installed}"
: "${RUN_DIR:?set RUN_DIR to a directory on the shared filesystem}"

SCHEDULER_FILE="${RUN_DIR}/scheduler-${SLURM_JOB_ID:-local}.json"
DASHBOARD_PORT="${DASHBOARD_PORT:-8787}"
GPUEXEC_PIDS=()

gpuexec_cleanup() {
    # stop what this script started, newest first (workers before the scheduler)
    local i
    for ((i = ${#GPUEXEC_PIDS[@]} - 1; i >= 0; i--)); do
        kill "${GPUEXEC_PIDS[i]}" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -f "${SCHEDULER_FILE}"
}

gpuexec_start_scheduler() {
    # on the first node (the batch shell runs there), outside any srun step
    mkdir -p "${RUN_DIR}"
    rm -f "${SCHEDULER_FILE}"
    local iface=()
    if [[ -n "${DASK_INTERFACE:-}" ]]; then iface=(--interface "${DASK_INTERFACE}"); fi
    # --preload gpuexec.dashboard: the /gpuexec page on the dashboard (docs/monitoring.md)
    "${PYTHON}" -m dask scheduler --scheduler-file "${SCHEDULER_FILE}" \
        --dashboard-address ":${DASHBOARD_PORT}" "${iface[@]}" --preload gpuexec.dashboard \
        > "${RUN_DIR}/scheduler-${SLURM_JOB_ID:-local}.log" 2>&1 &
    GPUEXEC_PIDS+=("$!")
    local waited=0
    until [[ -s "${SCHEDULER_FILE}" ]]; do
        if ! kill -0 "${GPUEXEC_PIDS[-1]}" 2>/dev/null; then
            echo "gpuexec: the Dask scheduler exited; see ${RUN_DIR}/scheduler-${SLURM_JOB_ID:-local}.log" >&2
            return 1
        fi
        if ((waited >= 120)); then
            echo "gpuexec: no scheduler file ${SCHEDULER_FILE} after 120 s" >&2
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    echo "gpuexec: Dask scheduler on $(hostname), file ${SCHEDULER_FILE}, dashboard port ${DASHBOARD_PORT}"
    echo "gpuexec: to watch it: ssh -L ${DASHBOARD_PORT}:$(hostname):${DASHBOARD_PORT} <login node>, then open http://localhost:${DASHBOARD_PORT}/status"
}

gpuexec_start_workers() {
    # "$@": the srun options that give each task one GPU and the cores next to it
    local extra=()
    if [[ -n "${DASK_INTERFACE:-}" ]]; then extra+=(--interface "${DASK_INTERFACE}"); fi
    if [[ "${NO_CPU_WORKERS:-0}" == 1 ]]; then extra+=(--no-cpu-workers); fi
    if [[ "${MPS:-0}" == 1 ]]; then extra+=(--mps); fi
    srun "$@" "${PYTHON}" "${GPUEXEC_REPO}/deploy/start_workers.py" \
        --scheduler-file "${SCHEDULER_FILE}" --gpu-workers "${GPU_WORKERS:-1}" \
        --gpu-threads "${GPU_THREADS:-2}" "${extra[@]}" \
        > "${RUN_DIR}/workers-${SLURM_JOB_ID:-local}.log" 2>&1 &
    GPUEXEC_PIDS+=("$!")
}

gpuexec_workers_per_task() {
    # "$1": cores per task. Workers start_workers.py starts in one task: GPU_WORKERS GPU
    # workers of GPU_THREADS cores, a CPU worker on each remaining core
    local gpu="${GPU_WORKERS:-1}" threads="${GPU_THREADS:-2}" rest
    if [[ "${NO_CPU_WORKERS:-0}" == 1 ]]; then
        echo "${gpu}"
        return
    fi
    rest=$(($1 - gpu * threads))
    if ((rest < 0)); then rest=0; fi
    echo $((gpu + rest))
}

gpuexec_run_analysis() {
    # "$@": arguments of deploy/run_analysis.py besides the scheduler file
    "${PYTHON}" "${GPUEXEC_REPO}/deploy/run_analysis.py" --scheduler-file "${SCHEDULER_FILE}" "$@"
}
