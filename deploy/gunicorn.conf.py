"""gunicorn settings behind nginx (deploy/nginx/flask-mcp.conf).

    gunicorn -c deploy/gunicorn.conf.py yourapp:app

The worker settings are the package's recommended ones
(flask_mcp/gunicorn_conf.py explains them); what changes behind the proxy is
who is trusted for what:

- gunicorn listens on loopback only, where nginx is its one client;
- the ``X-Forwarded-*`` headers nginx sets are applied once, by werkzeug's
  ``ProxyFix`` for one proxy, so the app sees the client's address and the
  public scheme, host and port (the protected-resource metadata, the
  ``WWW-Authenticate`` URL, the Origin check and per-address rate limits use
  them); gunicorn's own scheme-header handling is off so that nothing else
  interprets them.

docs/deploying.md explains each line.
"""

from typing import Any

from werkzeug.middleware.proxy_fix import ProxyFix

from flask_mcp import gunicorn_conf
from flask_mcp.gunicorn_conf import *  # noqa: F403

bind = "127.0.0.1:8000"  # the upstream of the nginx site
# The packaged keepalive (5 s) must stay longer than nginx keeps an idle upstream
# connection (keepalive_timeout 4s in the site): nginx then never sends a request on
# a connection gunicorn is closing.
assert gunicorn_conf.keepalive > 4, "gunicorn's keepalive must outlast nginx's upstream keepalive_timeout (4s)"
# Trust X-Forwarded-Proto & co. in ProxyFix only (below), not in gunicorn as well.
forwarded_allow_ips = ""

#: How many proxies set the X-Forwarded-* headers: nginx, and nothing before it.
#: A load balancer in front of nginx makes it 2 (and nginx must then append to
#: X-Forwarded-For and pass the balancer's X-Forwarded-Proto/-Host on).
PROXIES = 1


def post_worker_init(worker: Any) -> None:
    """Wrap the loaded app in ProxyFix (here, not in the app: trusting the
    headers is right only behind this proxy), then let the packaged hook freeze
    what the worker holds (flask_mcp/gunicorn_conf.py)."""
    worker.wsgi = ProxyFix(worker.wsgi, x_for=PROXIES, x_proto=PROXIES, x_host=PROXIES, x_port=PROXIES)
    gunicorn_conf.post_worker_init(worker)
