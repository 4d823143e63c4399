"""Running gpuexec inside a Slurm job: site profiles and the job template
(``gpuexec deploy slurm``, ``gpuexec.deploy.render``), the job's TLS scheduler
(``gpuexec.deploy.scheduler``), and the per-task worker starter (``gpuexec.deploy.workers``).
docs/deploy.md says how to use them."""
