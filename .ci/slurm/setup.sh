#!/usr/bin/env bash
# A one-node Slurm on localhost for tests/test_slurm_jobs.py: Debian's slurmctld, slurmd,
# slurm-client and munge, daemons started directly (no systemd), two fake GPUs as gres
# devices (character devices 1,3 listed in gres.conf). Needs root; quick when it is up.
# Prints nothing and exits 0 where it cannot run (not root, no apt): those tests skip.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "slurm setup: not root, skipped"; exit 0; }
if scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc'; then
  echo "slurm setup: already up"; exit 0
fi
source "$(dirname "$0")/../apt_missing.sh"
apt_install_missing "slurm setup" slurmctld slurmd slurm-client munge
host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /dev/fakegpu
for i in 0 1; do [ -e /dev/fakegpu/gpu$i ] || mknod /dev/fakegpu/gpu$i c 1 3; done
cat > /etc/slurm/gres.conf <<GRES
NodeName=$host Name=gpu File=/dev/fakegpu/gpu[0-1]
GRES
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=gpuexec-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=gpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown munge:munge /etc/munge/munge.key /run/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || su -s /bin/sh munge -c "/usr/sbin/munged" || /usr/sbin/munged --force
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then echo "slurm setup: up ($host, $cpus cores, 2 fake GPUs)"; exit 0; fi
  scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
  sleep 1
done
echo "slurm setup: the node did not come up; see /var/log/slurm" >&2
sinfo >&2 || true
exit 1
