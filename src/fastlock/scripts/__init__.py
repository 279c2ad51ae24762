"""Lua scripts: templates with includes and meta fields, the registry and SHA cache, error reports."""
