-- tools/call echo on an initialize-based revision: Mcp-Session-Id from BENCH_SESSION_ID
-- (empty: no session, the SDK's stateless mode).
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.legacy("tools/call", '"name":"echo","arguments":{"text":"hello"}')
