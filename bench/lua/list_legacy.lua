-- tools/list (52 tools, one page) on an initialize-based revision (session from BENCH_SESSION_ID).
local c = dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")
c.legacy("tools/list", "")
