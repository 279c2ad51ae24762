-- #include "shared/_lock_wake.lua"
-- Free the slot `job` holds in the scope at KEYS[at]; with a non-empty `expect` only if its
-- token is that one (the reaper frees exactly what it judged). A slot flagged QUEUED_BY is
-- handed to a queued listening waiter (shared/_lock_wake.lua) if one is due; one not handed
-- and flagged BLOCKED wakes the waiters on the wake list; drops
-- the scope from the bucket index (`track`) when no slot is left.
-- Returns the freed token, or 0 when the job held no slot.
local function release(at, limit, scope, job, expect, track, max_history)
  local values = read_slots(at + 1, limit)
  local freed, token, waited, held = nil, nil, nil, 0
  for i = 1, limit do
    if values[i] then
      local t, w, holder = parse_slot(values[i])
      if not freed and holder == job and (expect == "" or expect == t) then
        freed, token, waited = i, t, w
      else
        held = held + 1
      end
    end
  end
  if not freed then
    return 0
  end
  if max_history > 0 then -- before a hand-over's "locked": the log never shows two holders
    changelog(max_history, "unlocked", scope, job, token)
  end
  local bits = waited + 0
  if has_bit(bits, QUEUED_BY) and hand_over(at, KEYS[at + freed], values, limit, scope, max_history, bits) then
    held = held + 1
  else
    redis.call("DEL", KEYS[at + freed])
    if has_bit(bits, BLOCKED) then
      wake_waiters(at, 1, limit)
    end
  end
  if track and held == 0 then
    redis.call("ZREM", K_INDEX, index_member(scope, limit))
  end
  return token + 0
end
