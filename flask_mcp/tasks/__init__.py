"""Where task tools run (``MCP_TASK_RUNNER``): in threads of the web worker
(``threads``, the default) or on the app's Celery workers (``celery``). The
tasks extension itself (records, methods, polling) is protocol: it lives in
``flask_mcp.protocol``.

May import ``protocol``, ``auth`` and ``telemetry``; never the WSGI layer
(``http``), ``features`` or the extension.
"""
