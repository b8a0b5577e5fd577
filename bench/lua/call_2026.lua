-- tools/call echo on the 2026-07-28 wire (stateless: everything in the request).
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.modern("tools/call", '"name":"echo","arguments":{"text":"hello"}', "echo")
