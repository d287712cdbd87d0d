-- Helpers shared by bench/serve_post.lua and bench/serve_soak.lua (wrk scripts for bench/serve.sh and
-- bench/serve_soak.sh). Each loads it with dofile() from its own directory (found from its chunk name,
-- which wrk sets to the script's path), once per Lua state: wrk's main state (setup, done) and every
-- thread's state (init, request, response).
local M = {}

-- A JSON string literal for `s`: backslash, quote and the control characters (U+0000-U+001F, and DEL
-- for good measure) escaped; every other byte, UTF-8 sequences (>= 0x80) included, passes unchanged.
local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
                  ['\r'] = '\\r', ['\t'] = '\\t' }
function M.json_string(s)
  return '"' .. s:gsub('[%z\1-\31\127"\\]', function(c)
    return escapes[c] or string.format('\\u%04x', c:byte())
  end) .. '"'
end

-- The lines of a file (without their line breaks), as a list; fails on a missing or empty file.
function M.read_lines(path)
  assert(path, "the sentence file is missing: wrk ... -s SCRIPT URL -- FILE")
  local file = assert(io.open(path, "rb"))
  local text = file:read("*a")  -- not file:lines(): LuaJIT's ends a line at a NUL byte
  file:close()
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  local last = text:match("([^\n]+)$")  -- a last line without a line break
  if last then lines[#lines + 1] = last end
  assert(#lines > 0, path .. ": no sentences")
  return lines
end

-- `{"q": "..."}` for one sentence.
function M.translate_body(sentence)
  return '{"q": ' .. M.json_string(sentence) .. '}'
end

-- A number as JSON (integers without a fraction, the rest with 3 decimals).
local function number(x)
  if x == math.floor(x) and math.abs(x) < 2^53 then return string.format("%d", x) end
  return string.format("%.3f", x)
end

-- A Lua table (string keys; number, string, boolean or table values) as a JSON object, the keys sorted
-- (the output is stable).
function M.json_object(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    local text
    if type(v) == "table" then
      text = M.json_object(v)
    elseif type(v) == "number" then
      text = number(v)
    elseif type(v) == "boolean" then
      text = tostring(v)
    else
      text = M.json_string(tostring(v))
    end
    parts[#parts + 1] = M.json_string(k) .. ": " .. text
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- Adds the per-thread counter tables `name` of every thread (wrk's thread objects, collected in setup())
-- into one table: each thread runs its own Lua state, and thread:get() copies a global out of it.
function M.sum_counters(threads, name)
  local total = {}
  for _, thread in ipairs(threads) do
    local counters = thread:get(name) or {}
    for k, v in pairs(counters) do total[k] = (total[k] or 0) + v end
  end
  return total
end

-- The fields every wrk script reports: requests, duration, rate, latency percentiles (ms), socket
-- errors (connect, read, write, timeout) from summary.errors.
function M.summary_fields(summary, latency)
  local seconds = summary.duration / 1e6
  local e = summary.errors
  return {
    requests = summary.requests,
    duration_s = seconds,
    requests_per_s = summary.requests / seconds,
    latency_ms = {
      p50 = latency:percentile(50) / 1000, p90 = latency:percentile(90) / 1000,
      p99 = latency:percentile(99) / 1000, mean = latency.mean / 1000, max = latency.max / 1000,
    },
    socket_errors = { connect = e.connect, read = e.read, write = e.write, timeout = e.timeout,
                      total = e.connect + e.read + e.write + e.timeout },
  }
end

return M
