-- _replies.lua: the seat calls' answers: the reply store (remember, replay) that answers a
-- repeat of a call word for word, and the naming of every answer on its way out
-- (named_reply). seats/scripts.py puts it after _lib.lua (it uses int_arg and format), with
-- reply_spec before it: the answers' fields, generated from seats/protocol/replies.py.
--
-- A script builds its answer as a table {code, value, ...}: that table is what the store
-- keeps (the stored form, version 1 in protocol/replies.py: the release before names kept
-- the same, so two releases sharing Redis in a deploy read each other's), and what
-- named_reply turns into {code, 'name name ...', value, value, ...} for Python: the answer's
-- field names in one text, then their values in that order.

-- Idempotency: a seat call carries a request id; its reply is kept for a repeat of the
-- call (redis-py re-sending after a socket timeout, a client retrying after a lost reply),
-- which is answered from it: a script that ran twice still changed things once and told
-- the caller what the first run did.
--
-- Replies live in the license's two reply hashes, one per *generation* of `ttl` ms
-- (generation g = floor(now / ttl), hash g mod 2): the field is a digest of the call, its
-- client or session and the request id (Python's, 12 characters), the value the reply
-- packed by pack_reply. A hash expires at the end of the generation after its own, so a
-- reply lives between `ttl` and 2 x `ttl` and nothing needs a sweep; a small hash stays a
-- listpack (about 90 bytes a reply, a large one about 110: docs/operations.md). `slot` is
-- {hash 0, hash 1, field}, made by reply_slot from the script's KEYS and ARGV.
local function reply_slot(hash0, hash1, field) return {hash0, hash1, field} end

-- A reply as short text, about half its JSON: the status word (one letter for the known
-- ones), then each element with a one-character prefix saying what it is: ' ' a number in
-- hexadecimal; '@' a time (ms) in hexadecimal from EPOCH; '^' a later time from the
-- reply's first one, or "'" for the first time minus the number after it (a deadline and
-- the lease's start: now = deadline - lease); '"' the same number as the element before
-- (seats and limit); '~' a string. Replies hold numbers, identifiers and status words,
-- which contain none of the prefixes; anything else is kept as JSON ('[').
-- (STATUS_LETTER and LETTER_STATUS, the known words' letters, are made where they are
-- used, by pack_any and unpack_reply: the common replies' packing needs neither, and a
-- table built at the top would be built on every call.)
local FIRST_TIME = 1e12  -- a number this large is a time in ms (2001 on)
local EPOCH = 1790000000000  -- 2026-09-21: times until 2028-11 take 9 hex digits

-- Hexadecimal, as string.format writes it in C (base 36, a loop in Lua, was 8 bytes
-- shorter a reply and 1.3 us slower).
local function hex(n)
  if n < 0 then return string.format('-%x', -n) end
  return string.format('%x', n)
end

local function from_hex(text)
  if string.sub(text, 1, 1) == '-' then return -tonumber(string.sub(text, 2), 16) end
  return tonumber(text, 16)
end

-- Any reply, element by element.
local function pack_any(reply)
  local STATUS_LETTER = {acquired = 'A', renewed = 'R', denied = 'D', ok = 'O',
    expired = 'E', unknown = 'U', released = 'L', gone = 'G'}
  local parts = {STATUS_LETTER[reply[1]] or reply[1]}
  local first_time, after_first
  for i = 2, #reply do
    local v = reply[i]
    if type(v) == 'number' and v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      if v == reply[i - 1] then
        parts[i] = '"'
      elseif first_time and v >= FIRST_TIME then
        if after_first and v == first_time - after_first then
          parts[i] = "'"
        else
          parts[i] = '^' .. hex(v - first_time)
        end
      elseif not first_time and v >= FIRST_TIME then
        first_time = v
        parts[i] = '@' .. hex(v - EPOCH)
      else
        parts[i] = ' ' .. hex(v)
      end
      if first_time and i > 2 and reply[i - 1] == first_time and after_first == nil then
        after_first = v
      end
    elseif type(v) == 'string' and not string.find(v, "[ @^'\"~%[]") then
      parts[i] = '~' .. v
    else
      return '[' .. string.sub(cjson.encode(reply), 2)
    end
  end
  return table.concat(parts)
end

-- The common replies in a few string.formats: the text pack_any makes of them, byte for
-- byte (tests/test_reply_store.py checks it), at about half its cost
-- (bench/lua_pack_reply.py). Each applies only when every element is what these shapes
-- hold, checked here: an identifier of [A-Za-z0-9_-], a time (ms) from EPOCH on, or an
-- integer in [0, FIRST_TIME); nil otherwise, and pack_any packs it.

-- {'acquired' | 'renewed', session_id, deadline, lease_ms, used, seats, limit, now,
-- borrowed}: '~session' '@deadline' ' lease', then used, seats and limit each ' n' or '"'
-- (the same as the one before), now as "'" (deadline - lease) or '^' from the deadline,
-- and ' borrowed'.
local function pack_lease_reply(letter, r)
  local sid, deadline, lease, used, seats, limit, now, borrowed =
    r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]
  if type(sid) ~= 'string' or type(deadline) ~= 'number' or type(lease) ~= 'number'
      or type(used) ~= 'number' or type(seats) ~= 'number' or type(limit) ~= 'number'
      or type(now) ~= 'number' or type(borrowed) ~= 'number' then return nil end
  if deadline % 1 ~= 0 or lease % 1 ~= 0 or used % 1 ~= 0 or seats % 1 ~= 0
      or limit % 1 ~= 0 or now % 1 ~= 0 or borrowed % 1 ~= 0 then return nil end
  if deadline < EPOCH or deadline >= 2 ^ 53 or now < FIRST_TIME or now >= 2 ^ 53
      or lease < 0 or lease >= FIRST_TIME or used < 0 or used >= FIRST_TIME
      or seats < 0 or seats >= FIRST_TIME or limit < 0 or limit >= FIRST_TIME
      or borrowed < 0 or borrowed >= FIRST_TIME then return nil end
  if not string.find(sid, '^[%w_%-]*$') then return nil end
  local start = "'"
  if now ~= deadline - lease then start = '^' .. hex(now - deadline) end
  return format('%s~%s@%x %x', letter, sid, deadline - EPOCH, lease)
    .. (used == lease and '"' or format(' %x', used))
    .. (seats == used and '"' or format(' %x', seats))
    .. (limit == seats and '"' or format(' %x', limit))
    .. start .. format(' %x', borrowed)
end

-- {'ok', deadline, lease_ms, now, borrowed, client_id}
local function pack_ok_reply(r)
  local deadline, lease, now, borrowed, client = r[2], r[3], r[4], r[5], r[6]
  if type(deadline) ~= 'number' or type(lease) ~= 'number' or type(now) ~= 'number'
      or type(borrowed) ~= 'number' or type(client) ~= 'string' then return nil end
  if deadline % 1 ~= 0 or lease % 1 ~= 0 or now % 1 ~= 0 or borrowed % 1 ~= 0 then
    return nil
  end
  if deadline < EPOCH or deadline >= 2 ^ 53 or now < FIRST_TIME or now >= 2 ^ 53
      or lease < 0 or lease >= FIRST_TIME or borrowed < 0 or borrowed >= FIRST_TIME then
    return nil
  end
  if not string.find(client, '^[%w_%-]*$') then return nil end
  local start = "'"
  if now ~= deadline - lease then start = '^' .. hex(now - deadline) end
  return format('O@%x %x%s %x~%s', deadline - EPOCH, lease, start, borrowed, client)
end

-- {'released' | 'gone', used, seats, lingering, now}
local function pack_release_reply(letter, r)
  local used, seats, lingering, now = r[2], r[3], r[4], r[5]
  if type(used) ~= 'number' or type(seats) ~= 'number' or type(lingering) ~= 'number'
      or type(now) ~= 'number' then return nil end
  if used % 1 ~= 0 or seats % 1 ~= 0 or lingering % 1 ~= 0 or now % 1 ~= 0 then
    return nil
  end
  if used < 0 or used >= FIRST_TIME or seats < 0 or seats >= FIRST_TIME or lingering < 0
      or lingering >= FIRST_TIME or now < EPOCH or now >= 2 ^ 53 then return nil end
  return format('%s %x', letter, used)
    .. (seats == used and '"' or format(' %x', seats))
    .. (lingering == seats and '"' or format(' %x', lingering))
    .. format('@%x', now - EPOCH)
end

-- The tail terms_tail adds (expires, end, flags, entitlements, max_version) after element
-- `i`, as pack_any packs it: `first` the reply's first time, `now` the time packed as "'"
-- (the first time minus the element after it); nil when an element is not what it holds.
-- (Three numbers and two texts written out, no table: bench/lua_pack_reply.py.)
local function tail_number(v, prev, first, now)
  if v == prev then return '"' end
  if v >= FIRST_TIME then
    if v == now then return "'" end
    return '^' .. hex(v - first)
  end
  return format(' %x', v)
end

local function pack_terms_tail(r, i, first, now)
  local exp, fin, flags, ent, maxv = r[i + 1], r[i + 2], r[i + 3], r[i + 4], r[i + 5]
  if type(exp) ~= 'number' or type(fin) ~= 'number' or type(flags) ~= 'number'
      or type(ent) ~= 'string' or type(maxv) ~= 'string' then return nil end
  if exp % 1 ~= 0 or exp < 0 or exp >= 2 ^ 53 or fin % 1 ~= 0 or fin < 0 or fin >= 2 ^ 53
      or flags % 1 ~= 0 or flags < 0 or flags >= 2 ^ 53 then return nil end
  -- (none of the prefixes in them: anchored, a negated class is one pass, 0.3 us less
  -- than looking for one of them from every position)
  if not string.find(ent, "^[^ @^'\"~%[]*$") or not string.find(maxv, "^[^ @^'\"~%[]*$") then
    return nil
  end
  return tail_number(exp, r[i], first, now) .. tail_number(fin, exp, first, now)
    .. tail_number(flags, fin, first, now) .. '~' .. ent .. '~' .. maxv
end

local function pack_reply(reply)
  local status, n, text = reply[1], #reply, nil
  -- A lease's reply may end in a warned idle lease's reclaim time ('i:<ms>') or its share
  -- group's sessions ('s:<n>'): packed last as '~i:<ms>', what pack_any makes of such a
  -- text (no prefix in it), after the rest packed below.
  local tag = ''
  local last = reply[n]
  if type(last) == 'string' and (status == 'ok' or status == 'acquired' or status == 'renewed')
      and string.find(last, '^[is]:%d+$') then
    tag, n = '~' .. last, n - 1
  end
  -- A weighted lease's reply ends in its weight (w > 1, weighted_tail): packed after the
  -- rest as ' w', which is what pack_any makes of it (it never equals the element before)
  local weight = ''
  if ((n == 10 or n == 15) and (status == 'acquired' or status == 'renewed'))
      or ((n == 7 or n == 12) and status == 'ok') then
    local w = reply[n]
    if type(w) ~= 'number' or w % 1 ~= 0 or w < 2 or w >= FIRST_TIME then
      return pack_any(reply)
    end
    weight, n = format(' %x', w), n - 1
  end
  if n == 14 and (status == 'acquired' or status == 'renewed') then
    text = pack_lease_reply(status == 'acquired' and 'A' or 'R', reply)
    local tail = text and pack_terms_tail(reply, 9, reply[3], reply[3] - reply[4])
    text = tail and text .. tail
  elseif n == 11 and status == 'ok' then
    text = pack_ok_reply(reply)
    local tail = text and pack_terms_tail(reply, 6, reply[2], reply[2] - reply[3])
    text = tail and text .. tail
  elseif n == 9 and status == 'acquired' then
    text = pack_lease_reply('A', reply)
  elseif n == 6 and status == 'ok' then
    text = pack_ok_reply(reply)
  elseif n == 9 and status == 'renewed' then
    text = pack_lease_reply('R', reply)
  elseif n == 5 and status == 'released' then
    text = pack_release_reply('L', reply)
  elseif n == 5 and status == 'gone' then
    text = pack_release_reply('G', reply)
  end
  if text then return text .. weight .. tag end
  return pack_any(reply)
end

local function unpack_reply(text)
  if string.sub(text, 1, 1) == '[' then return cjson.decode(text) end
  local LETTER_STATUS = {A = 'acquired', R = 'renewed', D = 'denied', O = 'ok',
    E = 'expired', U = 'unknown', L = 'released', G = 'gone'}
  local first = string.find(text, "[ @^'\"~]") or #text + 1
  local word = string.sub(text, 1, first - 1)
  local reply = {LETTER_STATUS[word] or word}
  local first_time, after_first
  for prefix, body in string.gmatch(string.sub(text, first), "([ @^'\"~])([^ @^'\"~]*)") do
    local v
    if prefix == '~' then
      v = body
    elseif prefix == '"' then
      v = reply[#reply]
    elseif prefix == '@' then
      v = EPOCH + from_hex(body)
      first_time = v
    elseif prefix == '^' then
      v = first_time + from_hex(body)
    elseif prefix == "'" then
      v = first_time - after_first
    else
      v = from_hex(body)
    end
    if first_time and #reply > 1 and reply[#reply] == first_time and after_first == nil
        and type(v) == 'number' then
      after_first = v
    end
    reply[#reply + 1] = v
  end
  return reply
end

local function replay(slot)
  local stored = redis.call('HGET', slot[1], slot[3]) or redis.call('HGET', slot[2], slot[3])
  if stored then return unpack_reply(stored) end
  return nil
end

-- `now`: the call's server time (ms), read once by the script (a second TIME here cost a
-- redis.call a call). The reply's generation is the one of `now`, so it lives more than
-- `ttl` from the call's own time, which a repeat of the call follows (it comes within
-- `ttl` of the first send), and at most 2 x `ttl`.
local function remember(slot, ttl_ms, now, reply)
  local ttl = tonumber(ttl_ms)
  local generation = math.floor(now / ttl)
  local hash = slot[generation % 2 + 1]
  redis.call('HSET', hash, slot[3], pack_reply(reply))
  redis.call('PEXPIREAT', hash, int_arg((generation + 2) * ttl))
  return reply
end

-- An answer table named: {code, 'name name ...', value, ...} by the code's fields
-- (reply_spec), for Python to read by name (seats/protocol/replies.py). The names go as one
-- text (a constant for an answer with every field): one element more than the table,
-- not one a value. A lease's answer (reply_spec's third table) names its optional parts
-- too, recognised as the scripts append them: the tagged texts from the end ('r:', 'u:',
-- 'm:'), then a weight (one number past the fields and whole sets of the terms' five),
-- then the terms. A stored reply of an older release may stop short of a field: the
-- field is left out (Python's default). An unknown code goes out alone.
local reply_fields, whole_reply, lease_answer, terms_fields, tagged, weight_field
-- the optional parts' names as the text gets them (' name'), made once with the spec
local terms_names, tag_names, weight_name

local function named_reply(reply)
  if not reply_fields then
    reply_fields, whole_reply, lease_answer, terms_fields, tagged, weight_field = reply_spec()
    terms_names, weight_name = ' ' .. table.concat(terms_fields, ' '), ' ' .. weight_field
    tag_names = {}
    for i, tag in ipairs(tagged) do tag_names[i] = ' ' .. tag[2] end
  end
  local code = reply[1]
  local names = reply_fields[code]
  if not names then return {code} end
  local last, base = #reply, #names + 1
  if last < base then
    local out = {code, table.concat(names, ' ', 1, last - 1)}
    for i = 2, last do out[i + 1] = reply[i] end
    return out
  end
  local out = whole_reply[code](reply)
  if last == base or not lease_answer[code] then return out end
  -- the optional parts' values go after the fields, each part's names after theirs in the
  -- text (one concatenation, no table of them)
  local n = #out
  local tags, weight, terms = '', '', ''
  for i = 1, #tagged do
    local v = reply[last]
    if type(v) == 'string' and string.sub(v, 1, 2) == tagged[i][1] then
      tags = tags .. tag_names[i]
      n = n + 1
      out[n] = string.sub(v, 3)
      last = last - 1
    end
  end
  if (last - base) % 5 == 1 then
    weight = weight_name
    n = n + 1
    out[n] = reply[last]
    last = last - 1
  end
  if last - base >= 5 then
    terms = terms_names
    for i = 1, 5 do out[n + i] = reply[base + i] end
  end
  out[2] = out[2] .. tags .. weight .. terms
  return out
end

-- A seat script's code (a function of KEYS and ARGV) made to answer by name: what it
-- returns goes out through named_reply. (seats/scripts.py wraps acquire, heartbeat and
-- release with it; the closure is made once per library load.)
local function answering(script)
  return function(KEYS, ARGV) return named_reply(script(KEYS, ARGV)) end
end
