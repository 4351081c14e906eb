-- wrk script for bench/run.py: POST one JSON-RPC request per call, check every response,
-- print a JSON summary (req/s, latency percentiles, errors, unexpected bodies) from done().
--
--   wrk -t1 -c16 -d10s --latency -s bench/wrk/mcp.lua URL -- EXPECT BODY_TAIL [HEADER...]
--
-- EXPECT     a substring every response body must contain (e.g. "text":"hello")
-- BODY_TAIL  the request object after its id, e.g. ,"method":"tools/list","params":{...}}
--            the script sends {"jsonrpc":"2.0","id":N<BODY_TAIL> with N unique per request
--            (a legacy session must never see two requests in flight with one id); "@N@" in it
--            becomes a string unique per request and per run (a fresh idempotency key every time)
-- HEADER     "Name: value" request headers
-- MCP_BENCH_HEADER (environment, optional) one more "Name: value" header, e.g. the
--            "Authorization: Bearer ..." credential, kept out of the command line (and out of
--            the wrk_command bench/run.py records)
-- A response counts as bad unless its status is 200, its body contains EXPECT and it holds
-- neither a JSON-RPC error nor a tool error. Bad responses are counted, never hidden.

-- setup(), done() (the BENCH_JSON line), the MCP_BENCH_HEADER header and the bad count: bench_json.lua
local shared = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "") .. "bench_json.lua")

local expect, tail, headers, base, run
local counter = 0

function init(args)
   expect = args[1]
   tail = args[2]
   headers = {}
   for i = 3, #args do
      local name, value = args[i]:match("^([^:]+):%s*(.*)$")
      headers[name] = value
   end
   shared.add_env_header(headers)
   base = (tid or 0) * 1000000000
   counter = 0
   math.randomseed(os.time())
   run = string.format("%d-%d", os.time(), math.random(1, 1000000000))
end

function request()
   counter = counter + 1
   local n = base + counter
   local body = string.format('{"jsonrpc":"2.0","id":%d', n) .. tail:gsub("@N@", run .. "-" .. n)
   return wrk.format("POST", wrk.path, headers, body)
end

function response(status, _, body)
   if status ~= 200
      or not body:find(expect, 1, true)
      or body:find('"error":', 1, true)
      or body:find('"isError":true', 1, true) then
      shared.count_bad(status, body)
   end
end
