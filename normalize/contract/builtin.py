"""Built-in driver names and their `module:Class`: a plain table, cheap enough for `--help`."""

BUILTIN_DRIVERS: dict[str, str] = {
    "workflow": "normalize.drivers.workflow:WorkflowDriver",
    "state_machine": "normalize.drivers.state_machine:StateMachineDriver",
    "user": "normalize.drivers.user:UserDriver",
    "llm": "normalize.drivers.llm:LLMDriver",
}
