"""The built-in drivers: llm, workflow, state_machine, user (the contract: `normalize.contract`)."""
