"""nbstream: stream language-model output into Jupyter notebooks.

Generation runs on a worker thread, text is coalesced in the kernel and sent
at a bounded rate by one pump thread, and the browser renders once per
animation frame, so neither the kernel nor the page freezes.

    from nbstream import ChatWidget
    chat = ChatWidget()            # embedded SmolLM2-135M-Instruct, offline
    chat                           # shows the widget
    reply = chat.send("Hello")     # returns at once
    reply.wait()                   # the answer
"""

from ._version import __version__
from .attachments import attach
from .core.attachment import Attachment, AttachmentError, AttachmentLimits
from .core.stream import Limits
from .doctor import doctor
from .logs import set_debug
from .options import StreamOptions
from .tools import Tool, ToolCall, tool
from .widgets.chat import ChatWidget
from .widgets.compare import Compare
from .widgets.magic import load_ipython_extension
from .widgets.reply import Reply, ReplyError, ReplyTimeout
from .widgets.streamview import StreamView, stream

__all__ = [
    "Attachment",
    "AttachmentError",
    "AttachmentLimits",
    "ChatWidget",
    "Compare",
    "Limits",
    "Reply",
    "ReplyError",
    "ReplyTimeout",
    "StreamOptions",
    "StreamView",
    "Tool",
    "ToolCall",
    "__version__",
    "attach",
    "doctor",
    "load_ipython_extension",
    "set_debug",
    "stream",
    "tool",
]
