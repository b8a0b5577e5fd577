"""The three servers the benchmark drives (flask-mcp, a bare-Flask floor, the official SDK)."""
