-- Declares two fields, out of the documented order: they still arrive as now, script_name.
-- #meta script_name now
return { ARGV, META.script_name, tostring(META.now), tostring(META.debug) }
