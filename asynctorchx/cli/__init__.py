"""The ``asynctorchx`` command line: see :mod:`asynctorchx.cli.main`."""
