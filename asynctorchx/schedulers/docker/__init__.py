"""``local_docker``: run each replica of an app as a Docker container, over aiodocker.

One private module per concern:

- ``_engine``: the engine connection, the only module that imports aiodocker; it maps
  aiodocker's errors to :mod:`asynctorchx.errors` and reads the engine's JSON documents
  into typed records (``Container``, ``Event``, ``Network``); :func:`has_docker`.
- ``_options``: the run options (:class:`Opts`, ``env``'s forms) and :class:`DockerOpts`.
- ``_request``: the dry-run request (:class:`DockerJob`, :class:`DockerContainer`, also
  as docker-py's ``containers.run`` keywords), labels, names and run options; no I/O.
- ``_state``: pure decision tables (container state to replica and app state) and the
  description built from the containers' records.
- ``_containers``: an app's containers on the engine (create, describe, list, stop,
  remove), and ``watch``, behind ``wait``/``wait_for_state_change``, over the engine's
  events stream.
- ``_network``: the bridge network, created once across processes.
- ``_logs``: log frames to whole lines with positions; a log read, or followed across
  restarts.
- ``_workspace``: ``.dockerignore``, build contexts and the workspace build.
- ``_scheduler``: :class:`DockerScheduler` composing them, and :func:`create_scheduler`.

App ids follow the one policy of every backend,
:func:`~asynctorchx.schedulers.toolkit.make_app_id`; :func:`container_name` is Docker's own.

This package is the implementation; its public names are imported from
:mod:`asynctorchx.schedulers.docker_scheduler`, TorchX's import path.
"""
