"""A web dashboard for queues and locks (``pip install 'fastlock[web]'``): ``python -m fastlock
web --url URL --queue NAME``, or :func:`app` mounted in your own ASGI app. See docs/web.md."""

from .app import app, serve
from .security import Auth, check_bind

__all__ = ["Auth", "app", "check_bind", "serve"]
