"""A component that appends one line to a file each time it is called."""

from __future__ import annotations

from asynctorchx.specs.api import AppDef, Role


def counted(marker: str) -> AppDef:
    """Append a line to ``marker``, then describe a one-replica app.

    Args:
        marker: the file that gets one line per call
    """
    with open(marker, "a", encoding="utf-8") as f:
        f.write("called\n")
    return AppDef(name="counted", roles=[Role(name="counted", image=".", entrypoint="true")])
