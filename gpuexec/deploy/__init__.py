"""Running gpuexec inside a Slurm job: site profiles and the job template
(``gpuexec deploy slurm``, ``gpuexec.deploy.render``), the job's TLS scheduler
(``gpuexec.deploy.scheduler``), the per-task worker starter (``gpuexec.deploy.workers``)
and the per-GCD worker preload for dask-jobqueue (``gpuexec.deploy.jobqueue``).
docs/deploy.md says how to use them."""
