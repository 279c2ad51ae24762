-- Return the caller's arguments and every metadata field.
-- #meta now debug max_history script_name server_version
return { ARGV, tostring(META.now), tostring(META.debug), META.max_history, META.script_name, META.server_version }
