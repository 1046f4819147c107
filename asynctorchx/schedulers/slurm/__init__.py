"""``slurm``: an app as one heterogeneous ``sbatch`` job; the public names are in
:mod:`asynctorchx.schedulers.slurm_scheduler` (TorchX's import path)."""
