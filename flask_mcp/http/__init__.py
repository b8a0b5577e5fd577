"""The WSGI layer: the blueprint's four views and everything that speaks HTTP.

``blueprint`` checks a request (Origin, Host, authentication, headers, size)
and hands it to the sans-IO core; the answer leaves as JSON (``json_response``,
``held_response``) or as a Server-Sent Events stream (``streaming``, ``sse``),
with ``peer`` telling whether the client is still there and ``capacity``
keeping threads for ordinary requests while streams are open.

May import every part below it (``protocol``, ``backends``, ``auth``,
``telemetry``, ``config``, ``errors``); nothing below imports it. ``state``
holds the per-app state ``init_app`` keeps in ``app.extensions["mcp"]``.
"""
