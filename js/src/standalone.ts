/**
 * The whole front end in one module, for where widgets carry it themselves
 * (marimo: `runtime.standalone()` in `nbstream/widgets/runtime.py`): the
 * bundle with every chunk (math, highlighting, entities, linkify, glyphs, tools) provided at once, since there
 * is no runtime widget to fetch them from.
 */
import { provideChunk } from "./chunks";
import * as entities from "./chunks/entities";
import * as glyphs from "./chunks/glyphs";
import * as highlight from "./chunks/highlight";
import * as linkify from "./chunks/linkify";
import * as math from "./chunks/math";
import * as tools from "./chunks/tools";
import widget from "./index";

provideChunk("math", math);
provideChunk("highlight", highlight);
provideChunk("entities", entities);
provideChunk("linkify", linkify);
provideChunk("glyphs", glyphs);
provideChunk("tools", tools);

export default widget;
