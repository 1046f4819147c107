"""``python -m asynctorchx``: the same CLI as the ``asynctorchx`` command."""

from asynctorchx.cli.main import main

if __name__ == "__main__":
    main()
