"""Batches: one workflow (or the agent) over many items, each a sub-task of one parent task.

`items` reads the items, `manifest` keeps a batch's plan and each item's
progress in the store, `items_make` makes an item's task and workspace,
`begin` starts or opens a batch, `parent` drives it (submit, re-attach,
collect, budget), `watch` tells where it stands and gathers what it made.
"""
