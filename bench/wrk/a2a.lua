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

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

local tail, expects, headers, base
local counter = 0
bad = 0
bad_sample = ""

function init(args)
   tail = args[1]
   expects = {}
   for i = 2, #args do
      table.insert(expects, args[i])
   end
   headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" }
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
