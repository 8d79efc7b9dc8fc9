// Every test file starts with every chunk (math, highlighting, entities, linkify, tools) loaded, as
// a page does once they arrived; chunks.test.ts resets them to test the loading.
import { provideChunk } from "../src/chunks";
import * as entities from "../src/chunks/entities";
import * as highlight from "../src/chunks/highlight";
import * as linkify from "../src/chunks/linkify";
import * as math from "../src/chunks/math";
import * as tools from "../src/chunks/tools";
import { setMathBudget } from "../src/math";
import { FRAME_BUDGET_MS } from "../src/scheduler";

provideChunk("math", math);
provideChunk("highlight", highlight);
provideChunk("entities", entities);
provideChunk("linkify", linkify);
provideChunk("tools", tools);

// Typesetting is bounded by a frame's budget in a page (math.ts); here on a clock that
// never moves, so that every formula is typeset at once whatever the machine's speed
// (math.test.ts gives the budget a clock of its own where it tests it).
setMathBudget({ now: () => 0, budgetMs: FRAME_BUDGET_MS });
