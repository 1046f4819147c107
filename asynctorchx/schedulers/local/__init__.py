"""The ``local_cwd`` and ``local_dir`` schedulers: replicas as real processes on this host.

TorchX's ``torchx.schedulers.local_scheduler``, awaitable, with guarantees it lacks: each
replica runs in a session of its own, tied to this process by a watchdog
(``_parent_death``) and its daemons ended with it (``_subreaper``); ``wait`` and
``log_iter`` are woken by exits and output, never polled; ``cancel`` is SIGTERM,
``stop_timeout``, SIGKILL to each group; ``max_retries`` and ``since``/``until`` are
honoured; a start that runs out of file descriptors or cannot run its entrypoint raises
:class:`~asynctorchx.errors.OpenFileLimitError` or
:class:`~asynctorchx.errors.ReplicaLaunchError` with nothing left running; and each app
is recorded (0600 JSON in ``$ASYNCTORCHX_STATE_DIR``, else
``$XDG_STATE_HOME/asynctorchx``, else ``~/.local/state/asynctorchx``) so any process of
the same user describes, follows, waits for, lists and cancels it (``_records``). Apps
still end with their supervising process (``apps_live_in_process``).

A ``LocalScheduler`` hosts its replicas in a task group, so it must be entered:
``async with create_cwd_scheduler("session") as scheduler:``; leaving the block
terminates what still runs. It installs no signal handler (see
:mod:`asynctorchx.runner`). The public names are imported from
:mod:`asynctorchx.schedulers.local_scheduler`, TorchX's import path.
"""
