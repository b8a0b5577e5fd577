"""gunicorn settings for the example: gthread workers, so a worker serves
several MCP requests (and, later, long-lived streams) at once."""

bind = "127.0.0.1:8000"
worker_class = "gthread"
# One process for now: sessions live in process memory until a shared backend
# (SQLite, Redis) is configured; with several workers a legacy client could
# land on a worker that does not know its session.
workers = 1
threads = 8
# Longer than any stream heartbeat, so idle streams are not killed.
timeout = 120
graceful_timeout = 30
accesslog = "-"
