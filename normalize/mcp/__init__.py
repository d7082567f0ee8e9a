"""The MCP client: server tables, sessions and the sandboxed transport that lend a run tools.

`config` reads the `[[mcp]]` / `[[workflow.mcp]]` server tables (plain data),
`client` starts and talks to the servers (the official SDK, imported on first
use). Serving normalize itself (`normalize mcp`) is `normalize.mcp_server`.
Nothing here imports the SDK at module level, so `normalize --help` stays fast.
"""
