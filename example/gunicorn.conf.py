"""gunicorn settings for the example: the package's recommended ones
(flask_mcp/gunicorn_conf.py explains each), bound to loopback port 8000.

    gunicorn -c example/gunicorn.conf.py example.app:app

which is the same as ``gunicorn -c python:flask_mcp.gunicorn_conf example.app:app``.
"""

from flask_mcp.gunicorn_conf import *  # noqa: F403

bind = "127.0.0.1:8000"
