"""MCP both ways: the client that lends MCP servers' tools to a run, and `normalize mcp`.

`config` reads the `[[mcp]]` / `[[workflow.mcp]]` server tables (plain data),
`client` starts and talks to the servers (the official SDK, imported on first
use), `server` serves normalize's own tools and tasks. Nothing here imports
the SDK at module level, so `normalize --help` stays fast.
"""
