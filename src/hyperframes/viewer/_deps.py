"""What the viewer needs beyond the core, and how to get it.

``starlette`` (routes, in :mod:`.app`) and ``uvicorn`` (the ASGI server, in
:mod:`.server`) come with the ``view`` extra. Those two modules import them inside
``try`` blocks that re-raise with :data:`INSTALL_HINT`, so a missing package says what
to install instead of showing a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

INSTALL_HINT = "the viewer needs starlette and uvicorn: pip install 'hyperframes-engine[view]'"


def missing(exc: ImportError) -> ImportError:
    """An :class:`ImportError` that names the missing module and the pip command."""
    return ImportError(f"{INSTALL_HINT} (missing: {exc.name or exc})")
