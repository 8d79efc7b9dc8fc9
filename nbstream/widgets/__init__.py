"""The widgets: the anywidget end of the pipeline and what users hold.

* :mod:`.widget`: :class:`~.widget.StreamingWidget`, the one anywidget class
  every nbstream widget is built on (history, starting replies, view commands);
* :mod:`.wire`: what the kernel sends a view (metas, deltas, snapshots) and the
  checking of what a view sends, by the types of :mod:`.protocol`;
* :mod:`.chat`, :mod:`.compare`, :mod:`.streamview`, :mod:`.magic`: the
  widgets and the ``%%chat`` / ``%%stream`` magics; :mod:`.reply`: the
  handle of one answer; :mod:`.runtime`: the front end, shared per kernel.
"""
