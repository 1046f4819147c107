"""The ``local_cwd`` and ``local_dir`` schedulers: replicas as real processes on this host.

TorchX's ``torchx.schedulers.local_scheduler``, made awaitable and made to do what
TorchX's leaves out:

* every replica is started with :func:`anyio.open_process` in a session of its own, so
  its whole process tree can be signalled; all replicas of an app start concurrently;
* each replica's process group is tied to this process by one watchdog process per host
  (started with the first replica): when this process is gone, even by ``SIGKILL``, the
  watchdog kills every replica group still running, then every process of their
  sessions or carrying their ``ASYNCTORCHX_REPLICA_TOKEN`` (daemons included); the
  limits (a descendant that left the session and cleared its environment, the instants
  between a fork and its registration and between a reap and its sweep) are in
  ``_parent_death``;
* daemons: on Linux this process becomes a child subreaper when it first starts a
  replica, so a descendant that left its replica's group with ``setsid`` (a double
  fork) is re-parented to it; each replica's descendants, known by the
  ``ASYNCTORCHX_REPLICA_TOKEN`` in their environment or by their session, are killed
  and reaped when the replica ends (cancel, close, an exception, a host signal).
  Limits, in ``_subreaper``: a descendant that leaves the session and clears its
  environment escapes; orphans of children other code started are re-parented here
  but never reaped by us; other platforms are not covered;
* ``wait`` is an await on process exit, and ``log_iter`` followers are woken by new
  output (no polling anywhere between an exit or a line and the caller);
* ``cancel`` sends SIGTERM to each replica's process group, waits ``stop_timeout``
  seconds, then SIGKILLs the group; when a replica's main process exits, what is left
  of its group is killed, as a container's processes die with its PID 1;
* ``max_retries`` with ``RetryPolicy.REPLICA`` or ``APPLICATION`` is honoured;
* ``since``/``until`` are honoured by ``log_iter``; the temporary log directory is
  removed when the scheduler closes;
* file descriptors: the first start raises this process's soft ``RLIMIT_NOFILE`` to its
  hard limit, once (``_supervisor``); a submit whose replicas cannot get their pipes
  raises :class:`~asynctorchx.errors.OpenFileLimitError` with nothing left running, and a
  replica whose output could not all reach its logs ends ``FAILED``, never ``SUCCEEDED``;
* a replica whose entrypoint is missing, not executable or not runnable fails the submit
  with :class:`~asynctorchx.errors.ReplicaLaunchError` (naming the replica, the ``PATH``
  searched or the file, and the fix; ``_supervisor``), nothing of the app left running;
* apps are seen from any process of the same user: the supervising process keeps a
  record of each app (0600 JSON through the one cattrs converter, atomically replaced,
  in ``$ASYNCTORCHX_STATE_DIR``, else ``$XDG_STATE_HOME/asynctorchx``, else
  ``~/.local/state/asynctorchx``, directories 0700), so another process's
  ``LocalScheduler`` describes, follows (inotify), waits for and cancels it (after
  checking each process group is still the recorded process: pid, start time, boot),
  and ``status`` after ``run`` ended reports the result; a supervisor killed by
  ``SIGKILL`` is reported ``FAILED``. Apps still end with their supervising process
  (``apps_live_in_process``). Finished records are pruned after 7 days, or beyond 1000
  per backend (``_records``).

A ``LocalScheduler`` hosts its replicas in a task group, so it must be entered:
``async with create_cwd_scheduler("session") as scheduler:``. Leaving the block (or
``close()``) terminates what still runs. Entering a scheduler installs no signal
handler: a :class:`~asynctorchx.runner.Runner` owns SIGTERM and SIGHUP on request (or
when the program leaves them at their defaults), and a program using a scheduler
directly asks with ``async with terminate_on_signals(scheduler):``
(:mod:`asynctorchx.runner`).

The private modules, one concern each: ``_request`` (the dry-run request, image
providers, run options), ``_supervisor`` (starting, running and restarting replicas:
their process groups, the open-file limit, launch errors, TorchElastic error files),
``_parent_death`` (tying replicas to this process through the toolkit's lifeline),
``_subreaper`` (ending the daemons of replicas), ``_log_files`` (log directories,
checked before anything is created in them, log files and their time index),
``_child_watcher`` (reaping children on Python < 3.12), ``_records`` (the one record per
app, written to disk by its keeper, and TorchX's ``SUCCESS`` file),
``_process_identity`` (knowing a process again: pid, start time, boot), ``_app_views``
(one view of an app, this process's or another's, for every query, and waking the
followers of other processes' apps: inotify, pid file descriptors), and ``_scheduler``
(``LocalScheduler``; its factories are in
:mod:`asynctorchx.schedulers.local_scheduler`).

This package is the implementation; its public names are imported from
:mod:`asynctorchx.schedulers.local_scheduler`, TorchX's import path.
"""
