-- wrk script for bench/run.py: POST one JSON-RPC request per call, check every response,
-- print a JSON summary (req/s, latency percentiles, errors, unexpected bodies) from done().
--
--   wrk -t1 -c16 -d10s --latency -s bench/wrk/mcp.lua URL -- EXPECT BODY_TAIL [HEADER...]
--
-- EXPECT     a substring every response body must contain (e.g. "text":"hello")
-- BODY_TAIL  the request object after its id, e.g. ,"method":"tools/list","params":{...}}
--            the script sends {"jsonrpc":"2.0","id":N<BODY_TAIL> with N unique per request
--            (a legacy session must never see two requests in flight with one id)
-- HEADER     "Name: value" request headers
-- MCP_BENCH_HEADER (environment, optional) one more "Name: value" header, e.g. the
--            "Authorization: Bearer ..." credential, kept out of the command line (and out of
--            the wrk_command bench/run.py records)
-- A response counts as bad unless its status is 200, its body contains EXPECT and it holds
-- neither a JSON-RPC error nor a tool error. Bad responses are counted, never hidden.

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

local expect, tail, headers, base
local counter = 0
bad = 0
bad_sample = ""

function init(args)
   expect = args[1]
   tail = args[2]
   headers = {}
   for i = 3, #args do
      local name, value = args[i]:match("^([^:]+):%s*(.*)$")
      headers[name] = value
   end
   local extra = os.getenv("MCP_BENCH_HEADER")
   if extra and extra ~= "" then
      local name, value = extra:match("^([^:]+):%s*(.*)$")
      if not name then
         error("MCP_BENCH_HEADER must be 'Name: value'")
      end
      headers[name] = value
   end
   base = (tid or 0) * 1000000000
   counter = 0
end

function request()
   counter = counter + 1
   local body = string.format('{"jsonrpc":"2.0","id":%d', base + counter) .. tail
   return wrk.format("POST", wrk.path, headers, body)
end

function response(status, _, body)
   if status ~= 200
      or not body:find(expect, 1, true)
      or body:find('"error":', 1, true)
      or body:find('"isError":true', 1, true) then
      bad = bad + 1
      if bad_sample == "" then
         bad_sample = tostring(status) .. " " .. body:sub(1, 300)
      end
   end
end

local function json_string(s)
   return '"' .. s:gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
   end) .. '"'
end

function done(summary, latency, _)
   local total_bad, sample = 0, ""
   for _, thread in ipairs(threads) do
      total_bad = total_bad + thread:get("bad")
      if sample == "" then sample = thread:get("bad_sample") end
   end
   local e = summary.errors
   local seconds = summary.duration / 1e6
   io.write(string.format(
      'BENCH_JSON {"requests":%d,"duration_s":%.6f,"rps":%.2f,'
         .. '"latency_ms":{"mean":%.4f,"stdev":%.4f,"min":%.4f,"max":%.4f,'
         .. '"p50":%.4f,"p90":%.4f,"p99":%.4f,"p99_9":%.4f},'
         .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
         .. '"bad":%d,"bad_sample":%s}\n',
      summary.requests, seconds, summary.requests / seconds,
      latency.mean / 1e3, latency.stdev / 1e3, latency.min / 1e3, latency.max / 1e3,
      latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
      latency:percentile(99) / 1e3, latency:percentile(99.9) / 1e3,
      e.connect, e.read, e.write, e.status, e.timeout,
      total_bad, json_string(sample)))
end
