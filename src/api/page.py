"""What the web page needs besides the API: its files, a favicon, Markdown rendering, and the
interactive API docs served from this server (no CDN: `/docs` works without internet).

- `POST /api/v1/render` turns Markdown into sanitised, highlighted HTML (`render.py`); the
  page calls it for finished answers and artifacts (deltas stream in as plain text).
- `/docs` and `/redoc` load Swagger UI and ReDoc from the `fastapi-offline` package's
  assets, mounted at `/docs-assets`, so the HTML references only this server.
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from .auth import Caller, caller
from .deps import error_docs
from .models import StorableText
from .render import highlight_css, render_markdown

STATIC_DIR = Path(__file__).resolve().parent / "static"
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
DOCS_ASSETS = "/docs-assets"
FAVICON = STATIC_DIR / "favicon.svg"


class RenderRequest(BaseModel):
    text: StorableText = Field(description="Markdown")


class RenderResult(BaseModel):
    html: str = Field(description="Sanitised HTML; highlighted code uses /highlight.css classes")


router = APIRouter(tags=["page"])


@router.post(
    "/render",
    response_model=RenderResult,
    responses=error_docs(400, 413),
    summary="Render Markdown as sanitised HTML (what the web page shows)",
)
async def render(body: RenderRequest, _caller: Caller = Depends(caller)) -> RenderResult:
    return RenderResult(html=render_markdown(body.text))


REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_js() -> bytes:
    """ReDoc's bundle with its footer logo taken from this server (the favicon) instead of
    its maker's CDN: the docs ask nothing of another host."""
    return (DOCS_ASSETS_DIR / "redoc.standalone.js").read_bytes().replace(
        REDOC_LOGO.encode(), b"/favicon.ico"
    )


def install_page(app: FastAPI) -> None:
    """Mount the page, its favicon and stylesheet for code, and the offline API docs."""
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get(f"{DOCS_ASSETS}/redoc.standalone.js", include_in_schema=False)
    async def redoc_js() -> Response:  # before the mount: it answers first
        return Response(_redoc_js(), media_type="text/javascript")

    app.mount(DOCS_ASSETS, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")
    no_cache = {"Cache-Control": "no-cache"}

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=no_cache)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(FAVICON, media_type="image/svg+xml")

    @app.get("/highlight.css", include_in_schema=False)
    async def code_colours() -> Response:
        return Response(highlight_css(), media_type="text/css")

    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}/favicon.ico",
            oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} API",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}/favicon.ico",
            with_google_fonts=False,
        )
        # and should a newer ReDoc name another image host: images from this server only
        page.headers["Content-Security-Policy"] = "img-src 'self' data: blob:"
        return page


__all__ = ["STATIC_DIR", "install_page", "router"]
