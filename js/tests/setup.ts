// Every test file starts with every chunk (math, highlighting, entities, linkify) loaded, as
// a page does once they arrived; chunks.test.ts resets them to test the loading.
import { provideChunk } from "../src/chunks";
import * as entities from "../src/chunks/entities";
import * as highlight from "../src/chunks/highlight";
import * as linkify from "../src/chunks/linkify";
import * as math from "../src/chunks/math";

provideChunk("math", math);
provideChunk("highlight", highlight);
provideChunk("entities", entities);
provideChunk("linkify", linkify);
