"""TorchX's module path ``torchx.workspace.api``: :class:`WorkspaceMixin` and ``Workspace``.

``Workspace`` (several projects mapped to sub-directories, a later TorchX's
``torchx.workspace.api.Workspace``) is :class:`asynctorchx.specs.Workspace`.

``WorkspaceMixin`` is TorchX's interface of a scheduler that builds a workspace into an
image.

TorchX 0.7.0 (``torchx.workspace.api.WorkspaceMixin``) marks a scheduler that can build
a local directory into what its roles run: its ``Runner`` builds the workspace of role 0
before the dry run when ``isinstance(scheduler, WorkspaceMixin)``. Here the hook
(``build_workspace_and_update_role``) is a method of every
:class:`~asynctorchx.schedulers.api.Scheduler`, a no-op unless the backend overrides
it, and the scheduler's capabilities (``Capabilities.workspace``) say whether it does.
This mixin keeps TorchX's class for code that subclasses it or tests ``isinstance``
against it, on that one source of truth.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

import attrs

from asynctorchx.schedulers.api import Scheduler
from asynctorchx.specs.api import AppDef, CfgVal, Role, Workspace, runopts

T = TypeVar("T")


class WorkspaceMixin(abc.ABC, Generic[T]):
    """A scheduler that builds a workspace (a local directory) into its roles' images.

    As ``torchx.workspace.api.WorkspaceMixin``: subclass it before the scheduler
    (``class MyScheduler(WorkspaceMixin[ImagesToPush], Scheduler[Request])``) and
    implement :meth:`build_workspace_and_update_role`. ``T`` is what
    :meth:`dryrun_push_images` returns and :meth:`push_images` takes.

    Unlike TorchX's, the methods that do I/O are coroutines
    (:meth:`build_workspace_and_update_role`, :meth:`push_images`), as every
    scheduler method that does I/O is here.

    A scheduler subclass whose ``capabilities`` say no workspace is given
    ``workspace=`` :attr:`workspace_build` in them when its class is made, so that the
    Runner and the CLI, which read the record, build its workspaces (TorchX marks such a
    scheduler by this mixin alone).

    ``isinstance(scheduler, WorkspaceMixin)`` is true for a subclass, and also for any
    scheduler whose ``capabilities.workspace`` is not ``None``: of the
    built-in schedulers, ``local_docker``'s, ``kubernetes``'s, and ``slurm``'s (a
    :class:`~asynctorchx.workspace.dir_workspace.DirWorkspaceMixin`, as TorchX's). The
    local schedulers run in the directory itself and build nothing, as in TorchX.
    """

    #: What the build makes of a workspace (see ``Capabilities.workspace``).
    workspace_build: ClassVar[Literal["image", "directory"]] = "image"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Record :attr:`workspace_build` in a scheduler subclass's ``capabilities``
        when they say no workspace (see the class)."""
        super().__init_subclass__(**kwargs)
        if issubclass(cls, Scheduler) and cls.capabilities.workspace is None:
            cls.capabilities = attrs.evolve(cls.capabilities, workspace=cls.workspace_build)

    @classmethod
    def __subclasshook__(cls, subclass: type) -> Any:
        """Count a scheduler class that builds workspaces as a subclass.

        Args:
            subclass: the class ``issubclass``/``isinstance`` asks about.

        Returns:
            ``True`` for a :class:`~asynctorchx.schedulers.api.Scheduler` subclass whose
            ``capabilities.workspace`` is not ``None``, else ``NotImplemented`` (the
            usual check).
        """
        if (
            cls is WorkspaceMixin
            and issubclass(subclass, Scheduler)
            and subclass.capabilities.workspace is not None
        ):
            return True
        return NotImplemented

    def workspace_opts(self) -> runopts:
        """Return the run options the workspace build reads (none by default).

        As ``torchx.workspace.api.WorkspaceMixin.workspace_opts``: a scheduler adds them
        to its own run options.
        """
        return runopts()

    @abc.abstractmethod
    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` and change ``role`` to run what was built.

        Typically builds an image from the directory and sets ``role.image`` to it. The
        runner calls it at dry run, for role 0 with ``Runner.run(..., workspace=...)``
        and for each role with its own ``Role.workspace``. A coroutine, since building
        does I/O (TorchX's is a plain method).

        Args:
            role: the role to change (in place).
            workspace: the local directory to build.
            cfg: the resolved run options.
        """

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """Rename the app's locally built images to where they will be pushed; return what to push.

        As ``torchx.workspace.api.WorkspaceMixin.dryrun_push_images``: a plain method (it
        does no I/O). A remote scheduler calls it at dry run, then :meth:`push_images`
        with the result before it schedules the app.

        Args:
            app: the app whose roles' images are renamed (in place).
            cfg: the resolved run options.

        Raises:
            NotImplementedError: the scheduler does not push images (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} does not push images")

    async def push_images(self, images_to_push: T) -> None:
        """Push the images :meth:`dryrun_push_images` named.

        As ``torchx.workspace.api.WorkspaceMixin.push_images``, but a coroutine, since
        pushing does I/O.

        Args:
            images_to_push: what :meth:`dryrun_push_images` returned.

        Raises:
            NotImplementedError: the scheduler does not push images (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} does not push images")


__all__ = ["Workspace", "WorkspaceMixin"]
