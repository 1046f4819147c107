"""TorchX's well-known metadata keys and variable names (``torchx.specs.metadata_keys``)."""

#: The variable naming the calling context (``cli_run``, a pipeline's name), which a
#: scheduler may stamp into a job's metadata as :attr:`app_metadata.CONTEXT`. The
#: ``run`` command sets it to ``cli_run`` unless it is set (TorchX's ``torchx run``).
TORCHX_CONTEXT_NAME: str = "TORCHX_CONTEXT_NAME"

#: The value written for a metadata entry that is not available.
NA: str = "<<NA>>"


class app_metadata:
    """The keys of an app's metadata that schedulers stamp."""

    CONTEXT: str = "torchx/context"
    """The calling context (:data:`TORCHX_CONTEXT_NAME`)."""

    VERSION: str = "torchx/version"
    """The version of the library that submitted the job."""

    SCHEDULER: str = "torchx/scheduler"
    """The scheduler's name."""

    ROLES_PREFIX: str = "torchx/roles."
    """The prefix of a role's keys, ``torchx/roles.<role>.<key>``: a role name holds no
    ``.`` or ``/``, so the first ``.`` after the prefix ends it."""
