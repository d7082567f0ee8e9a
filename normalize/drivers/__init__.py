"""The drivers: the contract in `base`, the built-in implementations beside it."""

BUILTIN_DRIVERS: dict[str, str] = {
    "workflow": "normalize.drivers.workflow:WorkflowDriver",
    "state_machine": "normalize.drivers.state_machine:StateMachineDriver",
    "user": "normalize.drivers.user:UserDriver",
    "llm": "normalize.drivers.llm:LLMDriver",
}
"""Built-in driver names and their `module:Class` (kept here so `--help` can list them cheaply)."""
