-- Shared by every workload script: builds the POST (body and headers) and
-- reports, after the run, one machine-readable line that bench/run.py parses.
--
-- Environment (set by bench/run.py):
--   BENCH_SESSION_ID      Mcp-Session-Id of a legacy session (omitted when empty)
--   BENCH_LEGACY_VERSION  MCP-Protocol-Version on the legacy wire (default 2025-11-25)
--   BENCH_NO_VERSION      "1": send no MCP-Protocol-Version header at all

local M = {}

M.MODERN = "2026-07-28"
M.LEGACY = os.getenv("BENCH_LEGACY_VERSION") or "2025-11-25"

local META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}'

-- Every request gets its own JSON-RPC id, as from a real client: the SDK's
-- stateful transport routes each answer to the stream of the request with
-- that id, so concurrent requests of one session sharing an id would lose answers.
local body_tail = ""
local counter = 0

function M.set_body(method, params)
  body_tail = ',"method":"' .. method .. '","params":{' .. params .. '}}'
  wrk.body = '{"jsonrpc":"2.0","id":0' .. body_tail
end

id_base = 0 -- set per thread by setup(), so threads never share ids

function request()
  counter = counter + 1
  if counter == 1 then counter = id_base + 1 end
  return wrk.format(nil, nil, nil, '{"jsonrpc":"2.0","id":' .. counter .. body_tail)
end

local function base_headers()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
end

-- A 2026-07-28 request: version, client capabilities in params._meta, and the
-- standard headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name when named).
-- `params` is the inner JSON of params without braces ("" for none).
function M.modern(method, params, name)
  base_headers()
  local inner = params ~= "" and (params .. "," .. META) or META
  M.set_body(method, inner)
  wrk.headers["MCP-Protocol-Version"] = M.MODERN
  wrk.headers["Mcp-Method"] = method
  if name then
    wrk.headers["Mcp-Name"] = name
  end
end

-- A request of an initialize-based revision: the session id (if any) and the
-- negotiated version in headers, nothing in _meta.
function M.legacy(method, params)
  base_headers()
  M.set_body(method, params)
  if os.getenv("BENCH_NO_VERSION") ~= "1" then
    wrk.headers["MCP-Protocol-Version"] = M.LEGACY
  end
  local sid = os.getenv("BENCH_SESSION_ID") or ""
  if sid ~= "" then
    wrk.headers["Mcp-Session-Id"] = sid
  end
end

-- Every 2xx answer must carry a JSON-RPC result (JSON or SSE alike); the
-- others are counted as bad bodies and flagged in the table.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id_base", #threads * 1000000000)
end

bad = 0

local bad_dir = os.getenv("BENCH_BAD_DIR") or ""

function response(status, headers, body)
  if status >= 200 and status < 300 and not (body and string.find(body, '"result":', 1, true)) then
    bad = bad + 1
    if bad <= 1 and bad_dir ~= "" then
      -- keep the first offending answer for the report
      local f = io.open(bad_dir .. "/bad-" .. bad .. ".txt", "w")
      if f then
        f:write("HTTP ", status, "\n")
        for k, v in pairs(headers) do f:write(k, ": ", v, "\n") end
        f:write("\n", body or "<no body>")
        f:close()
      end
    end
  end
end

function done(summary, latency, requests)
  local bad_total = 0
  for _, thread in ipairs(threads) do
    bad_total = bad_total + (thread:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,'
      .. '"status":%d,"timeout":%d,"bad_body":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout, bad_total,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end

return M
