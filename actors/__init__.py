"""Ray actors and the modules that talk to them: backend hosts and the pool that owns them, the
performance history, the labelled examples, the shared rate limits; the router's executor and its
local view of the backends (`directory`). Backend kinds, one module each, are in `backends/`."""
