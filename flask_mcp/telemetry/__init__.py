"""What an operator sees: spans and metrics by OpenTelemetry's MCP semantic
conventions and the access log (``observer``, ``otel``), the names they use
(``names``, importable without OpenTelemetry) and the gauges' sources
(``gauges``).

May import ``protocol`` and ``backends`` (its contracts); never the WSGI layer
(``http``), ``auth``, ``features`` or the extension.
"""
