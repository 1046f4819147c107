"""TorchX's component integration-test providers, ported to asynctorchx as a user would.

TorchX 0.7.0 checks its builtin components end to end with one provider per component
(``torchx.components.integration_tests.component_provider``): each makes the app its
component returns, with the arguments below, for a scheduler and an image. Porting them
takes the ``asynctorchx`` imports; the components are called with TorchX's arguments.

One change: TorchX's DDP provider runs its example module
``torchx.examples.apps.compute_world_size.main``, which needs TorchX and Hydra where
the job runs. Ours runs :mod:`tests.integration.compute_world_size`, the same check (one
all-reduce, compared with the world size) with the same ``dist.ddp`` arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from asynctorchx.components import dist, serve, utils
from asynctorchx.specs import AppDef

#: the DDP provider's program (a file: ``dist.ddp --script``)
WORLD_SIZE_SCRIPT = str(Path(__file__).with_name("compute_world_size.py"))

#: the schedulers whose replicas see this machine's temporary directory
_LOCAL = ("local_cwd", "local_dir")


class ComponentProvider:
    """Makes one component's app for ``scheduler`` and ``image``; ``setUp``, ``tearDown``
    are TorchX's names.

    Args:
        scheduler: where the app will run.
        image: the image the app's roles use.
    """

    #: what a line of the app's logs holds once it has run (checked by the suite)
    expected_log: str | None = None

    def __init__(self, scheduler: str, image: str) -> None:
        self._scheduler = scheduler
        self._image = image

    def get_app_def(self) -> AppDef:
        """Return the app to run (each provider's own)."""
        raise NotImplementedError

    def setUp(self) -> None:
        """Prepare what the app needs (before :meth:`get_app_def`)."""

    def tearDown(self) -> None:
        """Remove what the app left."""

    def check(self) -> None:
        """Assert what the app did, once it has succeeded (nothing by default)."""


class DDPComponentProvider(ComponentProvider):
    """``dist.ddp`` on 2 nodes of 2 processes, up to 3 retries, as TorchX's."""

    expected_log = "world size: 4"

    def get_app_def(self) -> AppDef:
        return dist.ddp(
            script=WORLD_SIZE_SCRIPT,
            name="ddp-trainer",
            image=self._image,
            cpu=1,
            j="2x2",
            max_retries=3,
            env={"LOGLEVEL": "INFO"},
        )


class ServeComponentProvider(ComponentProvider):
    """``serve.torchserve`` with ``dryrun=True``: TorchX's serving app starts and ends."""

    expected_log = "App serve started successfully"

    def get_app_def(self) -> AppDef:
        return serve.torchserve(
            model_path="dummy_path", management_api="dummy_api", image=self._image, dryrun=True
        )


class BoothComponentProvider(ComponentProvider):
    """``utils.booth`` at (1, 2): f = 5, written where TorchX's result tracker reads it.

    TorchX's leaves ``tracker_base`` at its default, ``/tmp/torchx-util-booth``; ours
    puts it in the temporary directory, which the test suite makes private.
    """

    expected_log = "booth(1.0, 2.0) = 5.0"

    def setUp(self) -> None:
        self._base = os.path.join(tempfile.gettempdir(), "torchx-util-booth")

    def get_app_def(self) -> AppDef:
        return utils.booth(x1=1.0, x2=2.0, tracker_base=self._base, image=self._image)

    def check(self) -> None:
        if self._scheduler != "local_docker":
            result = json.loads(Path(self._base, "0").read_text())
            assert result == {"booth_eval": 5.0}, result

    def tearDown(self) -> None:
        shutil.rmtree(self._base, ignore_errors=True)


class ShComponentProvider(ComponentProvider):
    """``utils.sh echo test``."""

    expected_log = "test"

    def get_app_def(self) -> AppDef:
        return utils.sh("echo", "test", image=self._image)


class TouchComponentProvider(ComponentProvider):
    """``utils.touch``: a file of the temporary directory on a local scheduler, else one
    relative to where the job runs."""

    def setUp(self) -> None:
        name = "torchx_touch_test.txt"
        local = self._scheduler in _LOCAL
        self._file_path = os.path.join(tempfile.gettempdir(), name) if local else name

    def get_app_def(self) -> AppDef:
        return utils.touch(file=self._file_path, image=self._image)

    def check(self) -> None:
        if self._scheduler != "local_docker":  # in the container, gone with it
            assert os.path.isfile(self._file_path), self._file_path

    def tearDown(self) -> None:
        if os.path.exists(self._file_path):
            os.remove(self._file_path)


class CopyComponentProvider(ComponentProvider):
    """``utils.copy``: a file of the temporary directory on a local scheduler, else
    ``README.md`` of where the job runs."""

    def setUp(self) -> None:
        if self._scheduler in _LOCAL:
            self._src_path = os.path.join(tempfile.gettempdir(), "torchx_copy_test.txt")
            self._dst_path = f"{self._src_path}.copy"
            if not os.path.exists(self._src_path):
                Path(self._src_path).write_text("test data")
        else:
            self._src_path, self._dst_path = "README.md", "README.md.copy"

    def get_app_def(self) -> AppDef:
        return utils.copy(src=self._src_path, dst=self._dst_path, image=self._image)

    def check(self) -> None:
        if self._scheduler != "local_docker":
            assert Path(self._dst_path).read_text() == Path(self._src_path).read_text()

    def tearDown(self) -> None:
        for path in (self._dst_path, self._src_path if self._scheduler in _LOCAL else None):
            if path and os.path.exists(path):
                os.remove(path)


#: every provider, as TorchX's suite finds them in its module
PROVIDERS: dict[str, type[ComponentProvider]] = {
    "booth": BoothComponentProvider,
    "copy": CopyComponentProvider,
    "ddp": DDPComponentProvider,
    "serve": ServeComponentProvider,
    "sh": ShComponentProvider,
    "touch": TouchComponentProvider,
}
