"""The builtin components: functions that return an :class:`~asynctorchx.specs.AppDef`.

A component is a plain function with annotated arguments and a Google-style docstring
(see :mod:`asynctorchx.specs.file_linter`); ``asynctorchx run <component> --arg value``
turns its command line into a call (:func:`asynctorchx.specs.builders.materialize_appdef`).

Builtins, named ``<module>.<function>`` after their module in this package (TorchX
0.7.0's names and arguments): ``utils.echo``, ``utils.touch``, ``utils.sh``,
``utils.python``, ``utils.copy``, ``utils.booth``, ``utils.binary``
(:mod:`.utils`), ``dist.ddp``, ``dist.spmd`` and ``dist.torchrun`` (:mod:`.dist`),
``metrics.tensorboard`` (:mod:`.metrics`) and ``serve.torchserve`` (:mod:`.serve`).
:mod:`.component_test_base` holds ``ComponentTestCase``, for testing components.
``asynctorchx builtins`` lists them; more can be registered under the entry point
group ``asynctorchx.components`` (see :mod:`asynctorchx.specs.finder`).
"""

from __future__ import annotations

#: The default image of the builtins: TorchX 0.7.0's (``torchx.IMAGE``). Ignored by
#: ``local_cwd``; ``local_docker`` pulls it.
IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"

__all__ = ["IMAGE"]
