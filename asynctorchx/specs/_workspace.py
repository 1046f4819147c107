"""The :class:`Workspace` (``torchx.workspace.api.Workspace``)."""

from __future__ import annotations

import attrs


@attrs.define
class Workspace:
    """Local projects to copy into a role's image when the app is submitted.

    ``projects`` maps a local path (a directory or a file) to the sub-directory of the
    image's workspace root it lands in; ``""`` puts its content at the root. A
    workspace of one project mapped to ``""`` is the plain directory that TorchX 0.7.0
    takes as ``workspace: str``.

    Which schedulers build workspaces, and where the root is, is theirs to say:
    ``local_docker`` builds an image on top of the role's image (its working directory
    is the root); ``local_cwd`` and ``local_dir`` run in place and ignore it.

    Args:
        projects: local path -> sub-directory in the workspace root.
    """

    projects: dict[str, str]

    def is_unmapped_single_project(self) -> bool:
        """Return True for one project mapped to the root (a plain directory)."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    @staticmethod
    def from_str(workspace: str) -> Workspace:
        """Parse a workspace given on a command line or in a config file.

        As TorchX's ``Workspace.from_str``, the text is read as YAML
        (``yaml.safe_load``):

        - a path: ``~/proj`` is one project at the root;
        - a mapping, in flow style (``{"~/proj": "proj", "~/lib": ""}``, JSON too) or one
          ``src: dst`` pair a line; ``src:`` alone puts ``src`` at the root.

        Args:
            workspace: the text.

        Raises:
            ValueError: the text is not YAML, or not a path nor a mapping of paths to
                sub-directories (strings).
        """
        import yaml

        fix = 'a workspace maps paths to sub-directories, e.g. {"~/proj": "proj"}'
        try:
            projects = yaml.safe_load(workspace)
        except yaml.YAMLError as exc:
            why = " ".join(str(exc).split())
            raise ValueError(f"workspace {workspace!r} is not YAML ({why}): {fix}") from None
        if isinstance(projects, str):
            return Workspace({projects: ""})
        if not isinstance(projects, dict) or not all(
            isinstance(k, str) and isinstance(v, str | None) for k, v in projects.items()
        ):
            raise ValueError(f"workspace {workspace!r}: {fix}")
        return Workspace({k: v or "" for k, v in projects.items()})

    def __str__(self) -> str:
        """The path of a plain directory, else ``src:dst;src2`` (for logs, not parsing)."""
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{src}:{dst}" if dst else src for src, dst in self.projects.items())
