-- wrk script for bench/serve_soak.sh: POST /translate with a mix of valid and invalid requests, and one
-- JSON line from done() that says how each kind was answered.
--
-- Usage: wrk -c C -t C -d 600s --timeout 10s -s bench/serve_soak.lua http://HOST:PORT -- FILE EVERY C C
--   FILE: the sentences (one a line, UTF-8); every EVERY-th request of a thread is an invalid one (0: none),
--   rotating among the kinds below; the valid ones are {"q": SENTENCE}, cycling through FILE. The last
--   two arguments repeat -t and -c: the script refuses to run unless they are equal.
--
-- Which request got which answer: each thread has ONE connection (-t = -c), and wrk keeps one request
-- in flight per connection (no pipelining), calling response() before it asks request() for the next
-- one; so a response always answers the thread's latest request(), and each answer is attributed to its
-- request's kind exactly. (wrk calls request() once more on thread 0 before the run to check the script,
-- which is never sent, and requests still in flight when the time is up get no answer: "unanswered",
-- sent minus answered, is at most C + 1.)
--
-- done() prints one line starting with '{': requests, duration_s, requests_per_s, latency_ms, socket_errors
-- (as bench/serve_post.lua), status ({code: count}), sent and answered ({kind: count}), valid_ok (200 with
-- "translatedText"), valid_bad ({code: count}: valid requests answered otherwise), invalid_4xx ({kind:
-- count}), invalid_bad ({"kind code": count}: invalid requests answered other than 4xx), wrong_reason
-- ({kind: count}: 4xx whose error does not name the expected problem; informative), and the totals
-- valid_not_200, invalid_not_4xx, unanswered.
local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "serve_common.lua")

-- Invalid kinds: a body made from a sentence, and a piece of the 4xx error message that names the problem.
local invalid = {
  { name = "malformed_json", reason = "malformed JSON",
    body = function(s) return '{"q": ' .. common.json_string(s) end },  -- no closing brace
  { name = "q_number", reason = "must be a string or a list of strings",
    body = function(_) return '{"q": 42}' end },
  { name = "invalid_utf8", reason = "UTF-8",  -- a lone continuation byte, a broken pair, 0xFF
    body = function(s) return '{"q": ' .. common.json_string(s .. " \128 \195\40 \255") .. '}' end },
  { name = "unknown_model", reason = "unknown model",
    body = function(s) return '{"q": ' .. common.json_string(s) .. ', "model": "no-such-model"}' end },
  { name = "beam_size_0", reason = "must be at least 1",
    body = function(s) return '{"q": ' .. common.json_string(s) .. ', "beam_size": 0}' end },
  { name = "not_object", reason = "must be a JSON object",
    body = function(s) return '[' .. common.json_string(s) .. ']' end },
}

local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  threads[#threads + 1] = thread
end

local sentences, every, next_sentence, sent_in_thread, invalid_in_thread, last_kind

local function post(body)
  return wrk.format("POST", "/translate", { ["Content-Type"] = "application/json" }, body)
end

local function add(t, key, n)
  t[key] = (t[key] or 0) + (n or 1)
end

function init(args)
  sentences = common.read_lines(args[1])
  every = tonumber(args[2]) or 8
  local thread_count, connections = tonumber(args[3]), tonumber(args[4])
  assert(thread_count and thread_count == connections,
         "serve_soak.lua needs one connection per thread: -- FILE EVERY THREADS CONNECTIONS, equal")
  next_sentence = math.floor(thread_index * #sentences / thread_count) % #sentences + 1
  -- Threads start the rotation of invalid kinds at different places too.
  sent_in_thread, invalid_in_thread = 0, thread_index
  -- Globals: done() reads them with thread:get().
  status_counts, sent, answered, valid_bad, invalid_4xx, invalid_bad, wrong_reason =
    {}, {}, {}, {}, {}, {}, {}
  counts = { valid_ok = 0 }
end

function request()
  local sentence = sentences[next_sentence]
  next_sentence = next_sentence % #sentences + 1
  sent_in_thread = sent_in_thread + 1
  if every > 0 and sent_in_thread % every == 0 then
    local kind = invalid[invalid_in_thread % #invalid + 1]
    invalid_in_thread = invalid_in_thread + 1
    last_kind = kind
    add(sent, kind.name)
    return post(kind.body(sentence))
  end
  last_kind = nil
  add(sent, "valid")
  return post(common.translate_body(sentence))
end

function response(status, headers, body)
  local code = tostring(status)
  add(status_counts, code)
  local kind = last_kind
  if kind == nil then
    add(answered, "valid")
    if status == 200 and body:find('"translatedText"', 1, true) then
      counts.valid_ok = counts.valid_ok + 1
    else
      add(valid_bad, code)
    end
  else
    add(answered, kind.name)
    if status >= 400 and status <= 499 then
      add(invalid_4xx, kind.name)
      if not body:find(kind.reason, 1, true) then add(wrong_reason, kind.name) end
    else
      add(invalid_bad, kind.name .. " " .. code)
    end
  end
end

local function total(t)
  local n = 0
  for _, v in pairs(t) do n = n + v end
  return n
end

function done(summary, latency, _)
  local result = common.summary_fields(summary, latency)
  result.status = common.sum_counters(threads, "status_counts")
  result.sent = common.sum_counters(threads, "sent")
  result.answered = common.sum_counters(threads, "answered")
  result.valid_ok = common.sum_counters(threads, "counts").valid_ok or 0
  result.valid_bad = common.sum_counters(threads, "valid_bad")
  result.invalid_4xx = common.sum_counters(threads, "invalid_4xx")
  result.invalid_bad = common.sum_counters(threads, "invalid_bad")
  result.wrong_reason = common.sum_counters(threads, "wrong_reason")
  result.valid_not_200 = total(result.valid_bad)
  result.invalid_not_4xx = total(result.invalid_bad)
  result.unanswered = total(result.sent) - total(result.answered)
  io.write(common.json_object(result), "\n")
end
