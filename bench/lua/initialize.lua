-- initialize: every request opens (and stores) a new legacy session; no version header,
-- as real clients send it.
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.legacy("initialize", '"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1.0"}')
wrk.headers["MCP-Protocol-Version"] = nil
wrk.headers["Mcp-Session-Id"] = nil
