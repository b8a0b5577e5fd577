-- tools/list (52 tools, one page) on the 2026-07-28 wire.
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.modern("tools/list", "", nil)
