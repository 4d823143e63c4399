#!/bin/bash -l
# gpuexec job for {{DESCRIPTION}}, rendered by `gpuexec deploy slurm`.
# Per node: {{GPUS}} Slurm tasks, one per GPU, each starting its GPU worker(s) and a CPU
# worker per remaining core (python -m gpuexec.deploy.workers); the Dask scheduler
# (TLS, its own credentials) and the analysis run on the first node. Everything after the
# script name goes to `gpuexec run`.
{{DIRECTIVES}}

set -euo pipefail
{{SETUP}}
PYTHON="${GPUEXEC_PYTHON:-python3}"
umask 077
RUN_DIR="${GPUEXEC_RUN_DIR:-{{RUN_DIR}}}/${SLURM_JOB_ID}"
mkdir -p "${RUN_DIR}"
chmod 700 "${RUN_DIR}"
echo "gpuexec: run directory ${RUN_DIR} (scheduler file, TLS credentials, logs, output)"

PIDS=()
cleanup() {
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[i]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

srun --overlap --nodes=1 --ntasks=1 --cpus-per-task=1 \
    "${PYTHON}" -m gpuexec.deploy.scheduler --run-dir "${RUN_DIR}" --login {{LOGIN}} {{LISTEN}} \
    > "${RUN_DIR}/scheduler.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 120); do
    [[ -s "${RUN_DIR}/scheduler.json" ]] && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "${RUN_DIR}/scheduler.log" >&2; exit 1; }
    sleep 1
done
cat "${RUN_DIR}/scheduler.log"

WORKER_OPTIONS=({{WORKER_OPTIONS}})
{{MPS}}
srun --overlap --nodes="${SLURM_NNODES}" --ntasks-per-node={{GPUS}} {{SRUN_WORKERS}} \
    "${PYTHON}" -m gpuexec.deploy.workers --run-dir "${RUN_DIR}" "${WORKER_OPTIONS[@]}" \
    > "${RUN_DIR}/workers.log" 2>&1 &
PIDS+=("$!")

"${PYTHON}" -m gpuexec run {{ANALYSIS}} "$@" --scheduler-file "${RUN_DIR}/scheduler.json" \
    --wait-plans $((SLURM_NNODES * {{GPUS}})) --out "${GPUEXEC_OUT:-${RUN_DIR}/output.pkl}"
