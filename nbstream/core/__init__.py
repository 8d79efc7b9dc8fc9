"""The streaming core: from a source's pieces to the messages a view is sent.

Imports neither ipywidgets nor :mod:`nbstream.sources`, so a list and a fake
clock test all of it.

* :mod:`.pieces`: the contract types (pieces, :class:`~.pieces.Outcome`,
  statuses, :class:`~.pieces.ChatMessage`); imports nothing of nbstream;
* :mod:`.stream`: one message in flight (buffer, lifecycle, time limits);
  :mod:`.figures`: what a stream measures;
* :mod:`.pump`: the one thread that sends, for every widget of the kernel;
* :mod:`.lanes`: worker threads, one first-in first-out lane per model;
* :mod:`.loading`: a source's loading reports; :mod:`.trace`: timelines.
"""
