"""Sub-tasks: a task's children, made, run and collected (house rule 18).

`children` holds the plain records and the seam the `spawn` tool sees (core: the
tools and the task use it); `spawner` makes, runs and collects a task's children
through the executor; `attempts` is best-of-N over it; `fork` makes a new task
from another's state and checkpoint; `copies` sweeps the isolated copies no task
needs any more.
"""
