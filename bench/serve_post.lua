-- wrk script for bench/serve.sh: POST /translate with one sentence per request, {"q": "..."}, cycling
-- through a sentence file (one sentence a line, UTF-8), and one JSON line from done() with the results.
--
-- Usage: wrk -c C -t T -d 20s --timeout 10s -s bench/serve_post.lua http://HOST:PORT -- FILE T
--   FILE: the sentences; T: wrk's thread count (thread i starts at sentence i*n/T, so that the threads
--   do not send the same sentences in step).
--
-- done() prints {"requests", "duration_s", "requests_per_s" (= sentences/s), "latency_ms": {p50, p90,
-- p99, mean, max}, "status": {code: count}, "non2xx", "bad_bodies" (200 answers without
-- "translatedText"), "socket_errors": {connect, read, write, timeout, total}} on one line that starts
-- with '{' (wrk's own report has no such line). Each wrk thread has its own Lua state: the counters are
-- per thread, and done() adds them up through the thread objects kept in setup().
local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "serve_common.lua")

local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  threads[#threads + 1] = thread
end

local requests, next_request

function init(args)
  local lines = common.read_lines(args[1])
  local thread_count = tonumber(args[2]) or 1
  requests = {}
  for i, line in ipairs(lines) do
    requests[i] = wrk.format("POST", "/translate", { ["Content-Type"] = "application/json" },
                             common.translate_body(line))
  end
  next_request = math.floor(thread_index * #requests / thread_count) % #requests + 1
  status_counts = {}  -- globals: done() reads them with thread:get()
  counts = { bad_bodies = 0 }
end

function request()
  local r = requests[next_request]
  next_request = next_request % #requests + 1
  return r
end

function response(status, headers, body)
  local code = tostring(status)
  status_counts[code] = (status_counts[code] or 0) + 1
  if status == 200 and not body:find('"translatedText"', 1, true) then
    counts.bad_bodies = counts.bad_bodies + 1
  end
end

function done(summary, latency, _)
  local result = common.summary_fields(summary, latency)
  result.status = common.sum_counters(threads, "status_counts")
  result.non2xx = 0
  for code, n in pairs(result.status) do
    if tonumber(code) < 200 or tonumber(code) > 299 then result.non2xx = result.non2xx + n end
  end
  result.bad_bodies = common.sum_counters(threads, "counts").bad_bodies or 0
  io.write(common.json_object(result), "\n")
end
