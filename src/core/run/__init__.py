"""The run engine behind `ExecutionController`, split by phase.

- `runtime.py`: what every phase shares (services, checkpoints, the compiled graph, the runs
  in flight in this process, leases).
- `eventlog.py`: the one place that builds `Event` objects (live, replayed, appended).
- `runner.py`: starts a message and drives one run: the graph's `astream` loop, emitting
  events, pausing, completing, and cancel/failure handling.
- `resume.py`: validates decisions, claims a paused message, recovers a dead owner's run.
- `follow.py`: replays the event log and follows a live run, here or in another process.
- `maintenance.py`: leases, metrics, checkpoint cleanup and gc.
- `data.py`: the stored data the interfaces read (conversations, messages, tokens,
  artifacts) and conversation deletion.

Everything here is internal; the public surface is `ExecutionController`.
"""
