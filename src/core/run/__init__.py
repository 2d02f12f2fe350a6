"""The run engine, split by phase (opened as one `core.engine.Engine`; the public surface is
`artifactflow.Client`).

- `runtime.py`: what every phase shares (services, checkpoints, the compiled chat graph, the
  `GraphProvider`s registered from above, the runs in flight in this process, leases).
- `live.py`: a run in flight in this process (`LiveRun`, its readers' fan-out) and the
  `EventSink` that persists its events, then publishes them.
- `eventlog.py`: the one place that builds `Event` objects (live, replayed, appended).
- `start.py`: checks, stores and launches a new message.
- `segment.py`: drives one segment of a run (the graph's `astream` loop, emitting events,
  pausing, completing, cancel/failure handling), and cancels.
- `resume.py`: validates decisions, claims a paused message, recovers a dead owner's run.
- `retry.py`: a failed or cancelled message again, as a new sibling.
- `follow.py`: replays the event log and follows a live run, here or in another process.
- `maintenance.py`: leases, metrics, checkpoint cleanup and gc.
- `workers.py`, `bus.py`: several workers on one PostgreSQL database.
- `data.py`: the stored data the interfaces read (conversations, messages, tokens,
  artifacts) and conversation deletion.
"""
