"""``local_docker``: run each replica of an app as a Docker container (the subpackage).

The scheduler is split into one private module per concern; see
:mod:`asynctorchx.schedulers.docker_scheduler` for the public names.
"""
