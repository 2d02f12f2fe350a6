"""HTTP/SSE server over the core controller: `create_app(settings)` and `serve(settings)`."""

from .app import create_app, serve

__all__ = ["create_app", "serve"]
