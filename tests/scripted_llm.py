"""The scripted OpenAI-compatible server now lives in the package (`artifactflow.testing`);
this re-export keeps `from scripted_llm import ...` working in the tests."""

from artifactflow.testing.scripted_llm import *  # noqa: F403
from artifactflow.testing.scripted_llm import __all__  # noqa: F401
