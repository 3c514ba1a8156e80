-- load.lua: the wrk script of the package test's upgrade drill (./dev,
-- package_test).  Every answer that is not 2xx is a failure, and so is
-- every socket error (connect, read, write) and every request older than
-- wrk's --timeout; done() prints one line the test reads:
--   sent=N failed=N non2xx=N socket=N timeout=N max_ms=X
-- wrk -t1 -cC -d600s --timeout 10s -s load.lua -H 'Host: H' URL -- PACE_MS
-- PACE_MS: the wait of each connection between two requests (0: none), so
-- the public area's limit (nginx, 20 requests/s per address) is not hit.
-- SIGINT stops wrk early; done() runs all the same.
local threads = {}

function setup(thread)
	table.insert(threads, thread)
end

function init(args)
	pace = tonumber(args[1] or "0") or 0
	bad = 0
end

function delay()
	return pace
end

function response(status, headers, body)
	if status < 200 or status > 299 then
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local non2xx = 0
	for _, t in ipairs(threads) do
		non2xx = non2xx + t:get("bad")
	end
	local e = summary.errors
	local socket = e.connect + e.read + e.write
	io.write(string.format("sent=%d failed=%d non2xx=%d socket=%d timeout=%d max_ms=%.1f\n",
		summary.requests + socket, non2xx + socket + e.timeout, non2xx, socket,
		e.timeout, latency.max / 1000))
end
