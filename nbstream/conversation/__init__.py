"""The conversation model, apart from any widget: :mod:`.branches` (who
follows whom, which path shows) and :mod:`.transcript` (saving, loading,
OpenAI-style messages, Markdown)."""
