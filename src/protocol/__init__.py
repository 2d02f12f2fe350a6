"""The LangGraph Agent Server API (the Agent Protocol as `langgraph_sdk` calls it), served at
the server root beside `/api/v1`: an adapter over the facade (`client`), not a second engine.

Threads are conversations, checkpoints are the super-steps of a message (its input, each
model turn, each tool round), a run is a message's segment, and a permission pause is
LangChain's human-in-the-loop interrupt. `routes.py` builds the router (meta, assistants),
`threads.py` and `runs.py` the rest, `wire.py` the typed request bodies every route reads,
`deps.py` auth and errors, `catalog.py` the assistants, `service.py` the runs (queueing,
double-texting, cancel) and `starting.py` how one starts, `steps.py` the steps read off the
event log, `history.py` states and history, `frames.py` and `stream.py` the stream modes,
`convert.py` the message and decision shapes, `views.py` threads and runs, `records.py` the
two tables this layer adds.
"""

from __future__ import annotations

from .routes import protocol_router

__all__ = ["protocol_router"]
