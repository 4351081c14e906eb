-- What bench/wrk/mcp.lua and bench/wrk/a2a.lua share (each loads this file with dofile): wrk's
-- setup() that numbers the threads, the MCP_BENCH_HEADER header, the count of bad responses and
-- done(), which prints the one BENCH_JSON line bench/run.py reads:
--
--   BENCH_JSON {"requests":N,"duration_s":S,"rps":R,"latency_ms":{mean,stdev,min,max,p50,p90,p99,p99_9},
--               "errors":{connect,read,write,status,timeout},"bad":N,"bad_sample":"STATUS BODY..."}

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

bad = 0
bad_sample = ""

local shared = {}

-- Adds MCP_BENCH_HEADER (environment, optional, "Name: value") to headers.
function shared.add_env_header(headers)
   local extra = os.getenv("MCP_BENCH_HEADER")
   if extra and extra ~= "" then
      local name, value = extra:match("^([^:]+):%s*(.*)$")
      if not name then
         error("MCP_BENCH_HEADER must be 'Name: value'")
      end
      headers[name] = value
   end
end

-- Counts a bad response; the first one's status and body (300 bytes) are the sample.
function shared.count_bad(status, body)
   bad = bad + 1
   if bad_sample == "" then
      bad_sample = tostring(status) .. " " .. body:sub(1, 300)
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

return shared
