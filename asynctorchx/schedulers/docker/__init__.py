"""``local_docker``'s implementation, one private module per concern; its public names are in
:mod:`asynctorchx.schedulers.docker_scheduler`."""
