"""The LangGraph Agent Server API (the Agent Protocol as `langgraph_sdk` calls it), served at
the server root beside `/api/v1`: an adapter over the facade (`client`), not a second engine.

Threads are conversations, checkpoints are messages, a run is a message's segment, and a
permission pause is LangChain's human-in-the-loop interrupt. `routes.py` has the endpoints,
`service.py` the runs (queueing, double-texting, cancel), `stream.py` the stream modes,
`convert.py` the message and decision shapes, `views.py` threads and states, `records.py`
the two tables this layer adds.
"""

from __future__ import annotations

from .routes import protocol_router

__all__ = ["protocol_router"]
