"""TorchX's ``torchx.workspace.api``: :class:`WorkspaceMixin` and ``Workspace``."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

import attrs

from asynctorchx.schedulers.api import Scheduler
from asynctorchx.specs.api import AppDef, CfgVal, Role, Workspace, runopts

T = TypeVar("T")


class WorkspaceMixin(abc.ABC, Generic[T]):
    """TorchX's ``WorkspaceMixin``, async; any scheduler with ``capabilities.workspace`` is one."""

    #: What the build makes of a workspace (see ``Capabilities.workspace``).
    workspace_build: ClassVar[Literal["image", "directory"]] = "image"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if issubclass(cls, Scheduler) and cls.capabilities.workspace is None:
            cls.capabilities = attrs.evolve(cls.capabilities, workspace=cls.workspace_build)

    @classmethod
    def __subclasshook__(cls, subclass: type) -> Any:
        if (
            cls is WorkspaceMixin
            and issubclass(subclass, Scheduler)
            and subclass.capabilities.workspace is not None
        ):
            return True
        return NotImplemented

    def workspace_opts(self) -> runopts:
        """Return the run options the workspace build reads (none by default; TorchX's)."""
        return runopts()

    @abc.abstractmethod
    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` and change ``role`` (in place) to run what was built.

        Args:
            role: the role to change (role 0, or the role whose ``Role.workspace`` it is).
            workspace: the local directory to build.
            cfg: the resolved run options.
        """

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """Rename the app's built images to where they go; return what to push (default: raise)."""
        raise NotImplementedError(f"{type(self).__name__} does not push images")

    async def push_images(self, images_to_push: T) -> None:
        """Push what :meth:`dryrun_push_images` returned (default: ``NotImplementedError``)."""
        raise NotImplementedError(f"{type(self).__name__} does not push images")


__all__ = ["Workspace", "WorkspaceMixin"]
