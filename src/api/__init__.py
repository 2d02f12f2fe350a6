"""HTTP/SSE server over one `Client`: `create_app(settings)` and `serve(settings)`."""

from .app import create_app, serve

__all__ = ["create_app", "serve"]
