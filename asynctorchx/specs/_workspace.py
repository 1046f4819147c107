"""The :class:`Workspace` (``torchx.workspace.api.Workspace``)."""

from __future__ import annotations

import attrs


@attrs.define
class Workspace:
    """Local projects copied into a role's image at submit (``local_docker``; others ignore it).

    Args:
        projects: local path -> sub-directory of the workspace root (``""``: the root).
    """

    projects: dict[str, str]

    def is_unmapped_single_project(self) -> bool:
        """True for one project mapped to the root."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    @staticmethod
    def from_str(workspace: str) -> Workspace:
        """Parse YAML text: a path, or a mapping ``src: dst`` (TorchX's).

        Raises:
            ValueError: the text is not YAML, a path or a mapping of paths to strings.
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
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{src}:{dst}" if dst else src for src, dst in self.projects.items())
