"""The :class:`Workspace`: local directories built into a role's image at submit time.

TorchX added it after 0.7.0 (``torchx.workspace.api.Workspace``, exported from
``torchx.specs``). Re-exported by :mod:`asynctorchx.specs.api` and
:mod:`asynctorchx.specs`.
"""

from __future__ import annotations

import json

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

        Accepted forms (TorchX reads YAML; we read the subset TorchX users write,
        without depending on PyYAML):

        - a path: ``~/proj`` is one project at the root;
        - a JSON object: ``{"~/proj": "proj", "~/lib": ""}``;
        - one ``src: dst`` pair a line (a YAML block mapping); ``src:`` alone puts
          ``src`` at the root.

        Args:
            workspace: the text.

        Raises:
            ValueError: a JSON object whose keys or values are not strings.
        """
        text = workspace.strip()
        if text.startswith("{"):
            projects = json.loads(text)
            if not isinstance(projects, dict) or not all(
                isinstance(k, str) and isinstance(v, str | None) for k, v in projects.items()
            ):
                raise ValueError(
                    f"workspace {workspace!r}: a JSON workspace maps paths to sub-directories,"
                    ' e.g. {"~/proj": "proj"}'
                )
            return Workspace({k: v or "" for k, v in projects.items()})
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) == 1 and not lines[0].endswith(":") and ": " not in lines[0]:
            return Workspace({lines[0]: ""})
        projects = {}
        for line in lines:
            src, _, dst = line.partition(":")
            projects[src.strip()] = dst.strip().strip("\"'")
        return Workspace(projects)

    def __str__(self) -> str:
        """The path of a plain directory, else ``src:dst;src2`` (for logs, not parsing)."""
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{src}:{dst}" if dst else src for src, dst in self.projects.items())
