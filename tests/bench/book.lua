-- wrk -s book.lua: POST /api/public/calendar/appointments, one fresh
-- investor (token) per slot.  PIN_BENCH_BOOK_FILE: lines "slotId token";
-- thread k of n takes lines k, k+n, ...  Answers other than 201/409 are
-- counted and printed by done() (the bench fails on any).
local threads = {}
local counter = 0

function setup(thread)
   thread:set("tid", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

function init(args)
   nthreads = counter
   lines = {}
   local i = 0
   for l in io.lines(os.getenv("PIN_BENCH_BOOK_FILE")) do
      if i % 2 == tid % 2 then
         local slot, tok = l:match("^(%S+) (%S+)$")
         table.insert(lines, { slot, tok })
      end
      i = i + 1
   end
   pos = 0
   c201, c409, cother = 0, 0, 0
end

function request()
   pos = pos + 1
   local l = lines[((pos - 1) % #lines) + 1]
   return wrk.format("POST", "/api/public/calendar/appointments",
      { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. l[2] },
      '{"slotId":"' .. l[1] .. '"}')
end

function response(status, headers, body)
   if status == 201 then c201 = c201 + 1
   elseif status == 409 then c409 = c409 + 1
   else cother = cother + 1 end
end

function done(summary, latency, requests)
   local a, b, c = 0, 0, 0
   for _, t in ipairs(threads) do
      a = a + t:get("c201"); b = b + t:get("c409"); c = c + t:get("cother")
   end
   io.write(string.format("book: 201=%d 409=%d other=%d\n", a, b, c))
end
