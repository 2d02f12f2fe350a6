"""Context profiles: how much recall puts before a model call, and how it picks (issue 24).

```yaml
memory:
  recall: true              # recall before the lead's first model call of each message
  profile: standard         # the default profile (an agent's `memory_profile:` or a workflow
                            # node's `memory_profile:` picks another)
  profiles:                 # override or add profiles; the three below are the defaults
    compact:       {budget_tokens: 2000, mode: hybrid, order: newest}
    standard:      {budget_tokens: 4000, mode: hybrid}
    comprehensive: {budget_tokens: 8000, mode: semantic}
```

`budget_tokens` bounds the injected section (estimated as the context window estimates
text); `mode` is the search policy (`recency | semantic | hybrid`) and the order of the
section; `limit` is how many candidates the search returns before the budget cuts;
`min_score` and `relative` cut what is not about the query (semantic and hybrid only).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ProfileSettings(BaseModel):
    budget_tokens: int = Field(default=4000, ge=50)
    mode: Literal["recency", "semantic", "hybrid"] = "hybrid"
    limit: int = Field(default=50, ge=1, le=500)
    # semantic / hybrid relevance: a hit below `min_score`, or below `relative` × the best
    # hit's score, is not about the query and stays out (recency keeps the newest that fit)
    min_score: float = Field(default=0.1, ge=0)
    relative: float = Field(default=0.75, ge=0, le=1)
    # the section's order, which is also what the budget keeps first: `score` (best first) or
    # `newest` (the newest of the relevant hits; a `recency` mode is newest first anyway)
    order: Literal["score", "newest"] = "score"


DEFAULT_PROFILES: dict[str, ProfileSettings] = {
    # the newest of what is relevant, not the newest of all (issue 33: the newest 2,000 tokens
    # whatever the question answered 0 of 60 questions)
    "compact": ProfileSettings(budget_tokens=2000, mode="hybrid", order="newest"),
    "standard": ProfileSettings(budget_tokens=4000, mode="hybrid"),
    "comprehensive": ProfileSettings(budget_tokens=8000, mode="semantic"),
}
