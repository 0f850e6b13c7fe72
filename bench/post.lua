-- wrk script: POST /api/v1/messages with the partner key in $HUBBUB_KEY, to 100,000 phones in turn.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("HUBBUB_KEY")
counter = 0
request = function()
  counter = counter + 1
  local phone = string.format("+1555%07d", counter % 100000)
  return wrk.format(nil, "/api/v1/messages", nil, '{"phone":"' .. phone .. '","body":"Your order has shipped"}')
end
