"""Lua scripts: templates with includes and meta fields, the registry and SHA cache, error reports,
and the script-call policy (NOSCRIPT reload, BUSY waits) written once for every transport."""
