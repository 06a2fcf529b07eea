"""``/docs`` without the network: Swagger UI's own files, served by the server itself.

FastAPI's default page loads Swagger UI's script and style from a CDN, so on a machine
without internet access (or behind a strict proxy) ``/docs`` stays blank. The files come
instead from :data:`FILES`, the three that the page loads, copied from Swagger UI's release
(``swagger-ui-dist`` 5.36.0, Apache-2.0, its licence files beside them), mounted under
:data:`ASSETS`; like ``/docs`` itself they hold no data, so they need no key. They are copied
rather than taken from a package because the packages ship every build of Swagger UI with its
source maps (8 MB installed, for 2 MB used), and Swagger UI 5 is the first that reads the
OpenAPI 3.1 description FastAPI writes. ReDoc is not offered.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"  # Swagger UI's script, style and icon
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
FILES = Path(__file__).with_name("swagger_ui")

__all__ = ["ASSETS", "FILES", "OAUTH2_REDIRECT", "serve_docs"]


def serve_docs(app: FastAPI) -> None:
    """Give ``app`` (made with ``docs_url=None``) a ``/docs`` page whose every file it serves."""
    app.mount(ASSETS, StaticFiles(directory=FILES), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
                                   oauth2_redirect_url=OAUTH2_REDIRECT)

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
