-- Job words "<attempts>|<priority>|<unique>|<id>" and lease members "<token>|<word>" (the
-- current attempt counted) are specified in docs/queues.md, "Job words and lease members";
-- the client's definition of a member is fastlock.queues.jobs.Member.
local function split_word(word)
  return string.match(word, "^(%d+)|([^|]*)|([^|]*)|(.*)$")
end

local function split_member(member)
  return string.match(member, "^(%d+)|(.*)$")
end
