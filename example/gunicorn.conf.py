"""gunicorn settings for the example: gthread workers, so a worker serves
several MCP requests (and, later, long-lived streams) at once."""

bind = "127.0.0.1:8000"
worker_class = "gthread"
# Sessions live in the SQLite file of the instance folder by default, which all
# workers of this machine share; set FLASK_MCP_BACKEND=redis://... for several hosts.
workers = 2
threads = 8
# Longer than any stream heartbeat, so idle streams are not killed.
timeout = 120
graceful_timeout = 30
accesslog = "-"
