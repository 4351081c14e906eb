-- wrk script for bench/run.py's A2A workloads: POST one A2A JSON-RPC request per call (A2A-Version 1.0),
-- check every response, print a JSON summary from done() (the same BENCH_JSON line as mcp.lua).
--
--   wrk -t1 -c16 -d10s --latency -s bench/wrk/a2a.lua URL -- BODY_TAIL EXPECT [EXPECT...]
--
-- BODY_TAIL  the request object after its id, e.g. ,"method":"SendMessage","params":{...}}; every
--            "@N@" in it is replaced by a number unique per request (the message's messageId), and the
--            script sends {"jsonrpc":"2.0","id":N<BODY_TAIL> with the same N
-- EXPECT     substrings every response body must contain, e.g. "TASK_STATE_COMPLETED" and the
--            echoed artifact text
-- MCP_BENCH_HEADER (environment, optional) one more "Name: value" header, e.g. the
--            "Authorization: Bearer ..." credential, kept out of the command line (and out of
--            the wrk_command bench/run.py records)
-- A response counts as bad unless its status is 200, its body contains every EXPECT and it holds no
-- JSON-RPC error. Bad responses are counted, never hidden.

-- setup(), done() (the BENCH_JSON line), the MCP_BENCH_HEADER header and the bad count: bench_json.lua
local shared = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "") .. "bench_json.lua")

local tail, expects, headers, base
local counter = 0

function init(args)
   tail = args[1]
   expects = {}
   for i = 2, #args do
      table.insert(expects, args[i])
   end
   headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" }
   shared.add_env_header(headers)
   base = (tid or 0) * 1000000000
   counter = 0
end

function request()
   counter = counter + 1
   local n = tostring(base + counter)
   local body = '{"jsonrpc":"2.0","id":' .. n .. tail:gsub("@N@", n)
   return wrk.format("POST", wrk.path, headers, body)
end

function response(status, _, body)
   local ok = status == 200 and not body:find('"error":', 1, true)
   if ok then
      for _, expect in ipairs(expects) do
         if not body:find(expect, 1, true) then
            ok = false
            break
         end
      end
   end
   if not ok then
      shared.count_bad(status, body)
   end
end
