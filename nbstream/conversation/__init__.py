"""The conversation model, apart from any widget: :mod:`.history` (a widget's
messages and what the model is shown), :mod:`.branches` (who follows whom, which
path shows) and :mod:`.transcript` (saving, loading, OpenAI-style messages,
Markdown)."""
