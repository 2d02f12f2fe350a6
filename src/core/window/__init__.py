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
