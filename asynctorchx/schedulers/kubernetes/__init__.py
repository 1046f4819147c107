"""``kubernetes``: run an app as a Volcano ``Job`` (or a ``JobSet``) on Kubernetes, over lightkube.

One private module per concern:

- ``_request``: the Volcano ``Job`` manifest (:class:`KubernetesJob`), names, labels and
  run options; no I/O.
- ``_jobset``: the ``JobSet`` manifest (run option ``job_api=jobset``, Kueue's label
  with ``queue``) and its state table; no I/O.
- ``_jobapi``: what differs per job API (Volcano, JobSet), one record each.
- ``_apiserver``: the API server connection, the only module that imports lightkube; it
  maps lightkube's and httpx's errors to :mod:`asynctorchx.errors`.
- ``_state``: Volcano job phases and pod phases to app and replica states, and the
  typed ``Job`` and ``Pod`` every job and pod is parsed into once (pure).
- ``_informer``: one list-then-watch per resource kind and namespace, shared by every
  waiter of a scheduler (the toolkit's ``SharedFeed``).
- ``_logs``: a replica's log, read or followed across dropped connections and retries.
- ``_scheduler``: :class:`KubernetesScheduler` composing them, and :func:`create_scheduler`.

This package is the implementation; its public names are imported from
:mod:`asynctorchx.schedulers.kubernetes_scheduler`, TorchX's import path.
"""
