"""TorchX's well-known metadata keys and variable names (``torchx.specs.metadata_keys``)."""

#: The variable naming the calling context (``cli_run``, a pipeline's name).
TORCHX_CONTEXT_NAME: str = "TORCHX_CONTEXT_NAME"

#: The value written for a metadata entry that is not available.
NA: str = "<<NA>>"


class app_metadata:
    """The keys of an app's metadata that schedulers stamp."""

    CONTEXT: str = "torchx/context"
    VERSION: str = "torchx/version"
    SCHEDULER: str = "torchx/scheduler"
    #: ``torchx/roles.<role>.<key>``; a role name holds no ``.``, so the first ``.`` ends it.
    ROLES_PREFIX: str = "torchx/roles."
