-- #include "shared/_queue_words.lua"
-- #include "shared/_queue_unique.lua"
-- Dead-letter words at `now`: the dead set gets the id, K_ERR "<attempts>|<priority>|<error>";
-- their until-done unique locks ('d' + digest) are released (a dead job is finished).
local function bury(words, error, now)
  local dead, errors, locks = {}, {}, {}
  for i, word in ipairs(words) do
    local attempts, priority, unique, id = split_word(word)
    dead[2 * i - 1] = int(now)
    dead[2 * i] = id
    errors[2 * i - 1] = id
    errors[2 * i] = attempts .. "|" .. priority .. "|" .. error
    if string.sub(unique, 1, 1) == "d" then
      locks[#locks + 1] = {string.sub(unique, 2), id}
    end
  end
  redis.call("ZADD", K_DEAD, unpack(dead))
  redis.call("HSET", K_ERR, unpack(errors))
  release_unique(locks)
end
