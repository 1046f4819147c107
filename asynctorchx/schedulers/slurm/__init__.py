"""The Slurm scheduler: an app runs as one heterogeneous ``sbatch`` job.

Follows ``torchx.schedulers.slurm_scheduler``. The modules, one concern each:

- :mod:`._request`: the ``sbatch`` command and script (pure, no I/O);
- :mod:`._state`: Slurm's states and the text of ``squeue``/``sacct``/``scontrol`` (pure);
- :mod:`._commands`: runs Slurm's commands and maps their failures to
  :mod:`asynctorchx.errors`;
- :mod:`._scheduler`: :class:`SlurmScheduler` and :func:`create_scheduler`, and the
  replicas' log files, followed until the job ends.

``scripts/slurm-cluster.sh`` starts a local cluster (see ``docs/slurm-cluster.md``);
``docs/slurm.md`` describes the run options and how ``wait`` works.

This package is the implementation; its public names are imported from
:mod:`asynctorchx.schedulers.slurm_scheduler`, TorchX's import path.
"""
