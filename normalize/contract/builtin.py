"""Built-in driver names and their `module:Class`: a plain table, cheap enough for `--help`."""

BUILTIN_DRIVERS: dict[str, str] = {  # in the order shell completion offers them
    "user": "normalize.drivers.user:UserDriver",
    "llm": "normalize.drivers.llm:LLMDriver",
    "workflow": "normalize.drivers.workflow:WorkflowDriver",
    "state_machine": "normalize.drivers.state_machine:StateMachineDriver",
    "claude": "normalize.drivers.harness:ClaudeDriver",
    "codex": "normalize.drivers.harness:CodexDriver",
    "aider": "normalize.drivers.harness:AiderDriver",
    "acp": "normalize.drivers.acp:AcpDriver",
}
