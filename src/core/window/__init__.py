"""Long runs that never overflow: token estimates, compaction, budgets and derived limits.

Pure building blocks the run driver and the agent nodes call; nothing here touches the graph:
- `tokens`: offline token estimates, calibrated from the provider's reported usage;
- `rounds`: an agent's working memory cut into tool rounds (the only legal cut points);
- `compaction`: when and what to summarize, the summary request, the state writes;
- `history`: the conversation history summarized once per branch and stored;
- `overflow`: recognising a provider's "context length exceeded" answer;
- `budget`: cost from prices, budget verdicts from usage records;
- `limits`: a model's window and the graph's recursion limit from the agents' round limits.

(Named `window` because `core/context.py` holds the run's runtime context.)
"""

from .budget import Budget, BudgetExceeded, Prices, Usage, check, cost_usd, tally
from .compaction import (
    CompactionConfig,
    CompactionResult,
    ContextWindowExceeded,
    fit_request,
    memory_writes,
    plan_compaction,
)
from .history import conversation_history
from .history_store import HistorySummaries
from .limits import context_window, recursion_limit
from .overflow import Overflow, parse_exception, parse_overflow
from .rounds import rounds_in
from .tokens import TokenCounter

__all__ = [
    "Budget",
    "BudgetExceeded",
    "CompactionConfig",
    "CompactionResult",
    "ContextWindowExceeded",
    "HistorySummaries",
    "Overflow",
    "Prices",
    "TokenCounter",
    "Usage",
    "check",
    "context_window",
    "conversation_history",
    "cost_usd",
    "fit_request",
    "memory_writes",
    "parse_exception",
    "parse_overflow",
    "plan_compaction",
    "recursion_limit",
    "rounds_in",
    "tally",
]
