-- server/discover (2026-07-28): what a 2026 client sends first.
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.modern("server/discover", "", nil)
