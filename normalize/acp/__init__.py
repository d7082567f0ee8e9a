"""normalize and the Agent Client Protocol: `normalize acp` (an ACP agent; see `agent`)."""
