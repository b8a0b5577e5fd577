"""What an app declares and a client is offered: tools, resources and
templates, prompts, completions, MCP Apps views and skills (``skills/``),
each a value object built at decoration time plus a registry; the content
types, options and JSON Schemas they share; and the halves of the
extension's API that register them (``resources_and_prompts``,
``skills.api``).

May import ``protocol``, ``auth``, ``config``, ``errors``, the call's ``context``
and ``coroutines`` (what runs an ``async def``); never the WSGI layer
(``http``), ``telemetry``, ``tasks`` or the extension.
"""
