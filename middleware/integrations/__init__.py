"""One-line integrations: the official SDK clients (:func:`middleware.wrap`), LangChain
agents (:mod:`.langchain`) and LiteLLM (:mod:`.litellm`), each in an optional extra."""
