"""An example web service over asynctorchx (Starlette + sse-starlette): see ``app.py``."""
